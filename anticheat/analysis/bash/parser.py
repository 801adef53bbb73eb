"""Bash, parsed with tree-sitter-bash into a flat list of simple commands.

Rules never look at the raw text of a command: they see `Command`s whose words have
their quotes resolved, wrappers (`env`, `timeout`, `sudo`, `xargs` …) peeled off, and
nested shells (`sh -c '…'`, `eval`, `$(…)`, here-documents fed to `bash`) flattened
into the same list, so hiding a command one level deeper changes nothing. Python code
the script runs (`python -c`, heredocs piped to python) is collected for `analysis.python`.
Parsing is bounded (bytes, nodes, nesting); what could not be seen is listed in
`Script.problems` so the caller can screen it conservatively instead of crashing.

`outline(source)` is the other reading of the same tree: the top-level structure (`;`,
`&&`, `||`, pipes, redirects, `!`) with each simple command's text, which the responder
replays. This module is the only one that touches tree-sitter.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from anticheat.analysis import limits
from anticheat.analysis.bash import decoding
from anticheat.analysis.bash.interpreters import Interpreters, unwrap
from anticheat.analysis.bash.syntax import (
    Command,
    Loop,
    Redirect,
    Script,
    Word,
    unescape_bare,
    unescape_dquoted,
)
from anticheat.analysis.limits import (
    MAX_PARSE_TOTAL,
    MAX_SH_DEPTH,
    MAX_SH_NESTING,
    MAX_SH_NODES,
    MAX_SH_SOURCE,
)

__all__ = [  # the data model is re-exported
    "Command",
    "Loop",
    "Outline",
    "Redirect",
    "Script",
    "Shape",
    "Word",
    "outline",
    "parse_script",
]

# the caps live in `limits`, with why; these names are what callers and tests know
MAX_SOURCE_BYTES = MAX_SH_SOURCE
MAX_NODES = MAX_SH_NODES
MAX_NESTING = MAX_SH_NESTING
MAX_DEPTH = MAX_SH_DEPTH

_PARSER = Parser(Language(tree_sitter_bash.language()))


def parse_script(source: str) -> Script:
    """Flatten a bash command line into simple commands; never raises on bad input."""
    script = Script()
    with limits.scope() as budget:
        try:
            _Walker(script, budget).run(source, depth=0)
        except RecursionError:  # a last resort: the nesting guards should stop well before
            script.problems.append("too deeply nested to screen")
            budget.give_up("shell too deeply nested to screen")
    return script


class _Walker(Interpreters):
    def __init__(self, script: Script, budget: limits.Budget) -> None:
        self.s = script
        self.b = budget
        self.level = 0
        self.env: dict[str, str] = {}
        self.cwd: str | None = ""
        self.function: str | None = None

    # ------------------------------------------------------------------ entry points

    def run(self, source: str, depth: int, decoded: bool = False, bg: bool = False) -> None:
        if depth > MAX_DEPTH:
            self._limit(f"nesting deeper than {MAX_DEPTH} levels was not screened")
            return
        if self.b.nodes >= MAX_NODES:  # nothing of it would be walked: do not parse it
            self._budget()
            return
        data = source.encode("utf-8", "surrogateescape")
        room = min(MAX_SOURCE_BYTES, MAX_PARSE_TOTAL - self.b.parse_bytes)
        if len(data) > room:
            if room < MAX_SOURCE_BYTES:
                self._limit(
                    f"more than {MAX_PARSE_TOTAL:,} bytes of shell to parse in one action: "
                    f"{len(data) - max(room, 0):,} were not screened"
                )
            else:
                self._limit(
                    f"command of {len(data)} bytes: only the first {MAX_SOURCE_BYTES} were screened"
                )
            if room <= 0:
                return
            data = data[:room]
        self.b.parse_bytes += len(data)
        tree = _PARSER.parse(data)
        root = tree.root_node
        if root.has_error:
            self.s.problems.append("shell syntax error (tree-sitter-bash could not parse it all)")
        self.block(root, depth, decoded, background=bg)

    def _limit(self, note: str) -> None:
        """A cap was reached: the rest is unseen (a problem of the script, and a give-up)."""
        if note not in self.s.problems:
            self.s.problems.append(note)
        self.b.give_up(note)

    def _budget(self) -> bool:
        self.b.nodes += 1
        if self.b.nodes > MAX_NODES:
            self._limit(f"node budget of {MAX_NODES} exhausted: rest not screened")
            return False
        return True

    # ------------------------------------------------------------------ statements

    def block(self, node: Node, depth: int, decoded: bool, background: bool) -> None:
        children = node.children
        for i, child in enumerate(children):
            if not child.is_named:
                continue
            bg = background or (i + 1 < len(children) and children[i + 1].type == "&")
            self.stmt(child, depth, decoded, bg)

    def stmt(
        self,
        node: Node,
        depth: int,
        decoded: bool,
        bg: bool,
        stdin: str | None = None,
        upstream: Command | None = None,
        stdin_from: str | None = None,
    ) -> list[Command]:
        """Walk one statement; returns the commands it produced (for pipes and redirects)."""
        b = self.b
        if b.nodes < MAX_NODES and self.level < MAX_NESTING:  # within both caps: no notes
            b.nodes += 1
            self.level += 1
        elif not self._budget() or not self._enter():
            return []
        try:
            return self._stmt(node, depth, decoded, bg, stdin, upstream, stdin_from)
        finally:
            self.level -= 1

    def _enter(self) -> bool:
        self.level += 1
        if self.level > MAX_NESTING:
            self._limit(f"syntax nested deeper than {MAX_NESTING}: not screened")
            self.level -= 1
            return False
        return True

    def _stmt(
        self,
        node: Node,
        depth: int,
        decoded: bool,
        bg: bool,
        stdin: str | None,
        upstream: Command | None,
        stdin_from: str | None,
    ) -> list[Command]:
        t = node.type
        if t == "command":
            return self.command(node, depth, decoded, bg, stdin, upstream, stdin_from)
        if t == "redirected_statement":
            return self.redirected(node, depth, decoded, bg, stdin, upstream, stdin_from)
        if t == "pipeline":
            return self.pipeline(list(node.named_children), depth, decoded, bg, stdin, upstream)
        if t == "variable_assignment":
            self.assign(node, depth, decoded)
            return []
        if t == "declaration_command":
            for c in node.named_children:
                if c.type == "variable_assignment":
                    self.assign(c, depth, decoded)
                else:
                    self.words_of(c, depth, decoded)
            return []
        if t == "subshell":
            saved = (self.cwd, dict(self.env))
            out = self.seq(node, depth, decoded, bg)
            self.cwd, self.env = saved
            return out
        if t == "function_definition":
            name_node = node.child_by_field_name("name")
            name = _text(name_node, "utf-8", "replace") if name_node else "?"
            before, outer = len(self.s.commands), self.function
            self.function = name
            body = node.child_by_field_name("body")
            if body is not None:
                self.stmt(body, depth, decoded, bg)
            self.function = outer
            self.s.functions[name] = self.s.commands[before:]
            return []
        if t in ("while_statement", "until_statement", "for_statement", "c_style_for_statement"):
            return self.loop(node, depth, decoded, bg)
        if t in ("comment", "heredoc_body", "heredoc_end", "heredoc_start"):
            return []
        # lists, if/case/compound statements, negations, test commands, ERROR nodes…
        return self.seq(node, depth, decoded, bg)

    def seq(self, node: Node, depth: int, decoded: bool, bg: bool) -> list[Command]:
        out: list[Command] = []
        children = node.children
        for i, child in enumerate(children):
            if not child.is_named:
                continue
            cbg = bg or (i + 1 < len(children) and children[i + 1].type == "&")
            if child.type in (
                "word",
                "string",
                "raw_string",
                "concatenation",
                "simple_expansion",
                "expansion",
                "command_substitution",
                "process_substitution",
                "number",
                "binary_expression",
                "unary_expression",
                "arithmetic_expansion",
                "test_operator",
                "parenthesized_expression",
                "ternary_expression",
            ):
                self.words_of(child, depth, decoded)
            else:
                out.extend(self.stmt(child, depth, decoded, cbg))
        return out

    def loop(self, node: Node, depth: int, decoded: bool, bg: bool) -> list[Command]:
        before = len(self.s.commands)
        out = self.seq(node, depth, decoded, False)
        body = self.s.commands[before:]
        spawns = any(c.background for c in body)
        if bg:
            for c in body:
                c.background = True
        infinite, iterations = False, None
        if node.type in ("while_statement", "until_statement"):
            cond = node.child_by_field_name("condition")
            ctext = _text(cond, "utf-8", "replace").strip().rstrip(";").strip() if cond else ""
            truthy = ctext in ("true", ":", "[ 1 ]", "((1))", "[ true ]", "/bin/true")
            infinite = truthy if node.type == "while_statement" else ctext in ("false",)
        elif node.type == "c_style_for_statement":
            infinite = node.child_by_field_name("condition") is None
        else:
            values = node.children_by_field_name("value")
            iterations = _count_values(values)
        exits = any(c.name in ("break", "exit", "return") for c in body)
        self.s.loops.append(Loop(infinite, exits, spawns, iterations, bg))
        return out

    def assign(self, node: Node, depth: int, decoded: bool) -> None:
        name_node = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        w = self.word(value, depth, decoded) if value is not None else Word("")
        if name_node is not None and name_node.type == "variable_name":
            name = _text(name_node, "utf-8", "replace")
            if w.static:
                self.env[name] = w.text
                self.s.computed.pop(name, None)
            else:
                self.env.pop(name, None)
                self.s.computed[name] = w.text[:400]  # `s=$(git tag | tail -1)`: where from

    def pipeline(
        self,
        stages: list[Node],
        depth: int,
        decoded: bool,
        bg: bool,
        stdin: str | None,
        upstream: Command | None,
    ) -> list[Command]:
        out: list[Command] = []
        for stage in stages:
            cmds = self.stmt(stage, depth, decoded, bg, stdin, upstream)
            out.extend(cmds)
            upstream = cmds[-1] if cmds else Command([Word("?", static=False)])
            stdin = decoding.static_output(upstream)
        return out

    def redirected(
        self,
        node: Node,
        depth: int,
        decoded: bool,
        bg: bool,
        stdin: str | None,
        upstream: Command | None,
        stdin_from: str | None,
    ) -> list[Command]:
        body = node.child_by_field_name("body")
        redirects: list[Redirect] = []
        tails: list[tuple[str, Node]] = []  # what tree-sitter hangs off a heredoc redirect
        for child in node.children:
            if child is body or not child.is_named:
                continue
            if child.type == "file_redirect":
                r = self.redirect(child, depth, decoded)
                if r is not None:
                    redirects.append(r)
            elif child.type == "herestring_redirect":
                arg = child.named_children[-1] if child.named_children else None
                if arg is not None:
                    w = self.word(arg, depth, decoded)
                    stdin, stdin_from = (w.text + "\n" if w.static else None), "<<<"
            elif child.type == "heredoc_redirect":
                stdin, stdin_from = self.heredoc(child, depth, decoded, redirects, tails)
        cmds = self.stmt(body, depth, decoded, bg, stdin, upstream, stdin_from) if body else []
        if body is None and redirects:  # `> file` alone truncates it: the null command
            cmds = [Command([Word(":")], cwd=self.cwd, background=bg, depth=depth)]
            self.s.commands.append(cmds[0])
        for c in cmds:
            c.redirects.extend(redirects)
        out = list(cmds)
        for kind, tail in tails:
            if kind == "pipe":
                last = cmds[-1] if cmds else None
                out.extend(
                    self.pipeline(
                        list(tail.named_children),
                        depth,
                        decoded,
                        bg,
                        decoding.static_output(last) if last else None,
                        last,
                    )
                )
            else:
                out.extend(self.stmt(tail, depth, decoded, bg))
        return out

    def heredoc(
        self,
        node: Node,
        depth: int,
        decoded: bool,
        redirects: list[Redirect],
        tails: list[tuple[str, Node]],
    ) -> tuple[str | None, str]:
        text: str | None = None
        for c in node.named_children:
            if c.type == "heredoc_body":
                quoted = any(
                    ch.type == "heredoc_start" and (ch.text or b"")[:1] in (b"'", b'"', b"\\")
                    for ch in node.children
                )
                if not quoted:  # an unquoted heredoc expands $(…): those commands run too
                    for sub in c.named_children:
                        self.words_of(sub, depth, decoded)
                text = _text(c, "utf-8", "surrogateescape")
            elif c.type == "file_redirect":
                r = self.redirect(c, depth, decoded)
                if r is not None:
                    redirects.append(r)
            elif c.type == "pipeline":
                tails.append(("pipe", c))
            elif c.type not in ("heredoc_start", "heredoc_end"):
                tails.append(("stmt", c))
        return text, "<<"

    def redirect(self, node: Node, depth: int, decoded: bool) -> Redirect | None:
        op, fd, target = "", None, None
        for c in node.children:
            if c.type == "file_descriptor":
                fd = _text(c)
            elif not c.is_named or c.type == "ERROR":
                op += _text(c, "utf-8", "replace")
            else:
                target = c
        if target is None:
            return None
        if op in (">&", "<&") and target.type == "number":
            return None  # fd duplication, not a file
        return Redirect(op or ">", self.word(target, depth, decoded), fd)

    # ------------------------------------------------------------------ commands

    def command(
        self,
        node: Node,
        depth: int,
        decoded: bool,
        bg: bool,
        stdin: str | None,
        upstream: Command | None,
        stdin_from: str | None,
    ) -> list[Command]:
        argv: list[Word] = []
        redirects: list[Redirect] = []
        for c in node.named_children:
            ct = c.type
            if ct == "variable_assignment":
                self.assign(c, depth, decoded)  # prefix assignment; approximate: keep it
            elif ct == "file_redirect":
                r = self.redirect(c, depth, decoded)
                if r is not None:
                    redirects.append(r)
            elif ct == "herestring_redirect":
                arg = c.named_children[-1] if c.named_children else None
                if arg is not None:
                    w = self.word(arg, depth, decoded)
                    stdin, stdin_from = (w.text + "\n" if w.static else None), "<<<"
            elif ct == "command_name":
                argv.append(
                    self.word(c.named_children[0] if c.named_children else c, depth, decoded)
                )
            else:
                argv.append(self.word(c, depth, decoded))
        if stdin_from is None and upstream is not None:
            stdin_from = upstream.name
        cmd = Command(
            argv,
            redirects,
            cwd=self.cwd,
            stdin=stdin,
            stdin_from=stdin_from,
            background=bg,
            depth=depth,
            decoded=decoded or any([w.decoded for w in argv]),
            in_function=self.function,
        )
        if depth == 0:
            cmd.start, cmd.end = node.start_byte, node.end_byte
        unwrap(cmd, upstream if stdin_from not in ("<<", "<<<") else None)
        self.s.commands.append(cmd)
        self._follow(cmd, depth, upstream)
        return [cmd]

    # ------------------------------------------------------------------ words

    def words_of(self, node: Node, depth: int, decoded: bool) -> None:
        """Visit expansions inside a non-command node so `$(…)` there is screened too."""
        b = self.b
        if b.nodes < MAX_NODES and self.level < MAX_NESTING:  # within both caps: no notes
            b.nodes += 1
            self.level += 1
        elif not self._budget() or not self._enter():
            return
        try:
            if node.type in ("command_substitution", "process_substitution"):
                self.word(node, depth, decoded)
                return
            for c in node.named_children:
                self.words_of(c, depth, decoded)
        finally:
            self.level -= 1

    def word(self, node: Node, depth: int, decoded: bool) -> Word:
        b = self.b
        if b.nodes < MAX_NODES and self.level < MAX_NESTING:  # within both caps: no notes
            b.nodes += 1
            t = node.type
            if t == "word" or t == "number":  # a leaf (most words): nothing nested to enter
                return Word(unescape_bare(_text(node)))
            self.level += 1
        elif not self._budget() or not self._enter():
            return Word(_text(node, "utf-8", "replace")[:200], static=False)
        try:
            return self._word(node, depth, decoded)
        finally:
            self.level -= 1

    def _word(self, node: Node, depth: int, decoded: bool) -> Word:
        t = node.type
        if t in ("string", "concatenation", "translated_string"):
            parts = self.string_parts(node, depth, decoded)
            return Word(
                "".join(p.text for p in parts),
                all(p.static for p in parts),
                any(p.decoded for p in parts),
            )
        raw = _text(node, "utf-8", "surrogateescape")
        if t in ("word", "number"):
            return Word(unescape_bare(raw))
        if t == "raw_string":
            return Word(raw[1:-1])
        if t == "ansi_c_string":
            return Word(decoding.ansi_c(raw[2:-1]))
        if t in ("simple_expansion", "expansion"):
            name = _var_name(node)
            if name is not None and name in self.env:
                return Word(self.env[name])
            for c in node.named_children:  # ${x:-$(cmd)} still runs cmd
                self.words_of(c, depth, decoded)
            return Word(raw, static=False)
        if t in ("command_substitution", "process_substitution"):
            cmds: list[Command] = []
            saved_cwd = self.cwd
            for c in node.named_children:
                cmds.extend(self.stmt(c, depth, decoded, False))
            self.cwd = saved_cwd
            out = decoding.static_output(cmds[-1]) if cmds else None
            decoded_out = any(c.name in decoding.DECODERS for c in cmds)
            if t == "command_substitution" and out is not None:
                return Word(out.rstrip("\n"), True, decoded=decoded_out)
            return Word(raw, static=False, decoded=decoded_out and out is not None, payload=out)
        if t == "arithmetic_expansion":
            return Word(raw, static=False)
        if t == "array":
            return Word(" ".join(self.word(c, depth, decoded).text for c in node.named_children))
        self.words_of(node, depth, decoded)
        return Word(raw, static=not any(ch in raw for ch in "$`"))

    def string_parts(self, node: Node, depth: int, decoded: bool) -> list[Word]:
        """The pieces of a word; in "…", the newlines tree-sitter leaves between pieces too."""
        parts: list[Word] = []
        quoted = node.type == "string"
        pos, data = node.start_byte + quoted, node.text or b""
        for c in node.named_children:
            if quoted and c.start_byte > pos:
                gap = data[pos - node.start_byte : c.start_byte - node.start_byte]
                parts.append(Word(unescape_dquoted(gap.decode("utf-8", "surrogateescape"))))
            parts.append(self.string_part(c, depth, decoded))
            pos = c.end_byte
        if quoted and len(data) > pos - node.start_byte + 1:
            gap = data[pos - node.start_byte : -1]  # up to the closing quote
            parts.append(Word(unescape_dquoted(gap.decode("utf-8", "surrogateescape"))))
        return parts

    def string_part(self, node: Node, depth: int, decoded: bool) -> Word:
        if node.type == "string_content":
            return Word(unescape_dquoted(_text(node, "utf-8", "surrogateescape")))
        return self.word(node, depth, decoded)


# ---------------------------------------------------------------------- outline


class Shape(StrEnum):
    seq = "seq"
    list = "list"
    pipe = "pipe"
    redirected = "redirected"
    negated = "negated"
    command = "command"
    assign = "assign"
    unknown = "unknown"


@dataclass(frozen=True, slots=True)
class Outline:
    """One node of a command line's top-level structure, as the responder replays it.

    `kind` is `seq` (statements in order; `background` marks one followed by `&`), `list`
    (`parts` left and right, `text` the operator), `pipe` (the stages), `redirected`
    (`parts` the body, `redirects` the text of each file redirect), `negated`, `command`
    (`text` its source), `assign`, or `unknown` (`text` what tree-sitter called it: a
    node whose output cannot be known without running it).
    """

    kind: Shape
    parts: tuple[Outline, ...] = ()
    text: str = ""
    background: bool = False
    redirects: tuple[str, ...] = ()


def outline(source: str) -> Outline | None:
    """The top-level structure of `source`; None when tree-sitter cannot read all of it."""
    root = _PARSER.parse(source.encode()).root_node
    if root.has_error:
        return None
    try:
        return _outline(root)
    except RecursionError:  # nesting no replay could follow
        return None


def _outline(node: Node, background: bool = False) -> Outline:
    t = node.type
    if t in ("subshell", "compound_statement", "program"):
        kids = node.children
        parts = tuple(
            _outline(child, i + 1 < len(kids) and kids[i + 1].type == "&")
            for i, child in enumerate(kids)
            if child.is_named and child.type != "comment"
        )
        return Outline(Shape.seq, parts, background=background)
    if t == "list":
        kids = node.children
        pair = (_outline(kids[0]), _outline(kids[2]))
        return Outline(Shape.list, pair, kids[1].type, background)
    if t == "pipeline":
        return Outline(Shape.pipe, tuple(_outline(s) for s in node.named_children), "", background)
    if t == "redirected_statement":
        body = node.child_by_field_name("body")
        if body is None:
            return Outline(Shape.unknown, text="redirect", background=background)
        if any(c.type in ("heredoc_redirect", "herestring_redirect") for c in node.children):
            return Outline(Shape.unknown, text="heredoc", background=background)
        redirects = tuple(
            _text(c, "utf-8", "replace") for c in node.children if c.type == "file_redirect"
        )
        return Outline(Shape.redirected, (_outline(body),), "", background, redirects)
    if t == "negated_command":
        return Outline(Shape.negated, (_outline(node.named_children[0]),), "", background)
    if t == "command":
        return Outline(Shape.command, text=_text(node), background=background)
    if t == "variable_assignment":
        return Outline(Shape.assign, background=background)
    return Outline(Shape.unknown, text=t, background=background)


# ---------------------------------------------------------------------- helpers


def _text(node: Node, encoding: str = "utf-8", errors: str = "surrogateescape") -> str:
    return (node.text or b"").decode(encoding, errors)


def _var_name(node: Node) -> str | None:
    kids = node.named_children
    if len(kids) == 1 and kids[0].type == "variable_name":
        return _text(kids[0])
    return None


def _count_values(values: list[Node]) -> int | None:
    if not values:
        return None
    total = 0
    for v in values:
        text = _text(v, "utf-8", "replace")
        n = decoding.range_size(text)
        total += n if n is not None else 1
    return total
