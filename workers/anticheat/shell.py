"""Bash, parsed with tree-sitter-bash into a flat list of simple commands.

Rules never look at the raw text of a command: they see `Command`s whose words have
their quotes resolved, wrappers (`env`, `timeout`, `sudo`, `xargs` …) peeled off, and
nested shells (`sh -c '…'`, `eval`, `$(…)`, here-documents fed to `bash`) flattened
into the same list, so hiding a command one level deeper changes nothing. Python code
the script runs (`python -c`, heredocs piped to python) is collected for `pycode`.
Parsing is bounded (bytes, nodes, nesting); what could not be seen is listed in
`Script.problems` so the caller can screen it conservatively instead of crashing.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from workers.anticheat import decode

__all__ = ["Command", "Loop", "Redirect", "Script", "Word", "parse_script"]

MAX_SOURCE_BYTES = 128 * 1024  # parse at most this much; beyond, screen the head and say so
MAX_NODES = 20_000  # syntax nodes visited per action, across every nesting level
MAX_NESTING = 150  # syntactic nesting ($( $( … ))) walked before giving up on the rest
MAX_DEPTH = 8  # nested `sh -c` / eval / decoded payload levels

_PARSER = Parser(Language(tree_sitter_bash.language()))

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "busybox-sh"})
PYTHONS = frozenset({"python", "python2", "python3", "pypy", "pypy3", "ipython"})
FOREIGN = {"perl": "-e", "ruby": "-e", "node": "-e", "nodejs": "-e", "php": "-r", "lua": "-e"}
# wrapper -> options that take a value; the wrapped command starts at the first operand
_WRAPPERS: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "nohup": frozenset(),
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"}),
    "doas": frozenset({"-u", "-C"}),
    "xargs": frozenset(
        {
            "-I",
            "-n",
            "-P",
            "-L",
            "-d",
            "-a",
            "-s",
            "-E",
            "--max-args",
            "--max-procs",
            "--delimiter",
            "--arg-file",
            "--replace",
        }
    ),
    "exec": frozenset({"-a"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "-t"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "time": frozenset({"-f", "-o", "--format", "--output"}),
    "setsid": frozenset(),
    "unbuffer": frozenset(),
    "chrt": frozenset(),
    "taskset": frozenset(),
    "flock": frozenset({"-w", "-E", "-c"}),
    "strace": frozenset({"-o", "-e", "-p", "-s", "-u"}),
    "ltrace": frozenset({"-o", "-e", "-p", "-s", "-u"}),
    "watch": frozenset({"-n", "--interval", "-d"}),
    "caffeinate": frozenset(),
    "fakeroot": frozenset(),
    "proxychains": frozenset({"-f"}),
    "proxychains4": frozenset({"-f"}),
    "torsocks": frozenset(),
}
_NUMERIC_FIRST = frozenset({"timeout", "chrt", "taskset"})  # a duration/priority/mask operand
_RUNNERS = {
    "uv": "run",
    "poetry": "run",
    "pipenv": "run",
    "conda": "run",
    "pdm": "run",
    "hatch": "run",
    "rye": "run",
    "pixi": "run",
}


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word. `static` is false when it depends on a runtime expansion."""

    text: str
    static: bool = True
    decoded: bool = False  # the value was recovered by statically decoding a payload


@dataclass(frozen=True, slots=True)
class Redirect:
    op: str  # '>', '>>', '<', '&>', '>|', '<>'
    target: Word
    fd: str | None = None


@dataclass(slots=True)
class Loop:
    infinite: bool  # `while true`, `while :`, `for ((;;))`, `until false`
    exits: bool  # the body can leave it (break, exit, return)
    spawns: bool  # the body starts background jobs
    iterations: int | None  # a static `for x in …` count, or `seq N` / `{1..N}` when visible
    background: bool = False


@dataclass(slots=True)
class Command:
    """One simple command, as bash would run it after expansion where that is static."""

    argv: list[Word]
    redirects: list[Redirect] = field(default_factory=list)
    wrappers: list[str] = field(default_factory=list)
    cwd: str | None = ""  # relative to where the action starts; None once unknown
    stdin: str | None = None  # text fed on stdin when known (heredoc, here-string, echo |)
    stdin_from: str | None = None  # the upstream command of a pipeline
    background: bool = False
    depth: int = 0
    xargs_from: Command | None = None  # under `… | xargs cmd`: the stage producing the args
    decoded: bool = False  # this command came out of a decoded payload
    in_function: str | None = None
    start: int = 0  # byte offsets in the top-level command (depth 0 only)
    end: int = 0
    name: str = ""  # basename of argv[0] (`/usr/bin/git` → `git`); kept by `rename()`

    def __post_init__(self) -> None:
        self.rename()

    def rename(self) -> None:
        self.name = posixpath.basename(self.argv[0].text) if self.argv else ""

    @property
    def args(self) -> list[Word]:
        return self.argv[1:]

    def texts(self) -> list[str]:
        return [w.text for w in self.argv[1:]]


@dataclass(slots=True)
class Script:
    commands: list[Command] = field(default_factory=list)
    functions: dict[str, list[Command]] = field(default_factory=dict)
    loops: list[Loop] = field(default_factory=list)
    python: list[tuple[str, str]] = field(default_factory=list)  # (code, where it came from)
    foreign: list[tuple[str, str]] = field(default_factory=list)  # (interpreter, code)
    decoded_exec: list[str] = field(default_factory=list)  # evidence of decoded payloads run
    dynamic_exec: list[str] = field(default_factory=list)  # shells/eval fed unknown text
    problems: list[str] = field(default_factory=list)


def parse_script(source: str) -> Script:
    """Flatten a bash command line into simple commands; never raises on bad input."""
    script = Script()
    try:
        _Walker(script).run(source, depth=0)
    except RecursionError:  # a last resort: the nesting guards should stop well before
        script.problems.append("too deeply nested to screen")
    return script


class _Walker:
    def __init__(self, script: Script) -> None:
        self.s = script
        self.nodes = 0
        self.level = 0
        self.env: dict[str, str] = {}
        self.cwd: str | None = ""
        self.function: str | None = None

    # ------------------------------------------------------------------ entry points

    def run(self, source: str, depth: int, decoded: bool = False, bg: bool = False) -> None:
        if depth > MAX_DEPTH:
            self.s.problems.append(f"nesting deeper than {MAX_DEPTH} levels was not screened")
            return
        data = source.encode("utf-8", "surrogateescape")
        if len(data) > MAX_SOURCE_BYTES:
            self.s.problems.append(
                f"command of {len(data)} bytes: only the first {MAX_SOURCE_BYTES} were screened"
            )
            data = data[:MAX_SOURCE_BYTES]
        tree = _PARSER.parse(data)
        root = tree.root_node
        if root.has_error:
            self.s.problems.append("shell syntax error (tree-sitter-bash could not parse it all)")
        self.block(root, depth, decoded, background=bg)

    def _budget(self) -> bool:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            if not any("node budget" in p for p in self.s.problems):
                self.s.problems.append(f"node budget of {MAX_NODES} exhausted: rest not screened")
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
        if not self._budget() or not self._enter():
            return []
        try:
            return self._stmt(node, depth, decoded, bg, stdin, upstream, stdin_from)
        finally:
            self.level -= 1

    def _enter(self) -> bool:
        self.level += 1
        if self.level > MAX_NESTING:
            if not any("nested" in p for p in self.s.problems):
                self.s.problems.append(f"syntax nested deeper than {MAX_NESTING}: not screened")
            self.level -= 1
            return False
        return True

    def _stmt(self, node: Node, depth: int, decoded: bool, bg: bool, stdin: str | None,
              upstream: Command | None, stdin_from: str | None) -> list[Command]:
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
            name = name_node.text.decode("utf-8", "replace") if name_node else "?"
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
            ctext = cond.text.decode("utf-8", "replace").strip().rstrip(";").strip() if cond else ""
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
            name = name_node.text.decode("utf-8", "replace")
            if w.static:
                self.env[name] = w.text
            else:
                self.env.pop(name, None)

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
            stdin = decode.static_output(upstream)
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
                        decode.static_output(last) if last else None,
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
                    ch.type == "heredoc_start" and ch.text[:1] in (b"'", b'"', b"\\")
                    for ch in node.children
                )
                if not quoted:  # an unquoted heredoc expands $(…): those commands run too
                    for sub in c.named_children:
                        self.words_of(sub, depth, decoded)
                text = c.text.decode("utf-8", "surrogateescape")
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
                fd = c.text.decode()
            elif not c.is_named or c.type == "ERROR":
                op += c.text.decode("utf-8", "replace")
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
            if c.type == "variable_assignment":
                self.assign(c, depth, decoded)  # prefix assignment; approximate: keep it
            elif c.type == "file_redirect":
                r = self.redirect(c, depth, decoded)
                if r is not None:
                    redirects.append(r)
            elif c.type == "herestring_redirect":
                arg = c.named_children[-1] if c.named_children else None
                if arg is not None:
                    w = self.word(arg, depth, decoded)
                    stdin, stdin_from = (w.text + "\n" if w.static else None), "<<<"
            elif c.type == "command_name":
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
            decoded=decoded or any(w.decoded for w in argv),
            in_function=self.function,
        )
        if depth == 0:
            cmd.start, cmd.end = node.start_byte, node.end_byte
        self._unwrap(cmd, upstream if stdin_from not in ("<<", "<<<") else None)
        self.s.commands.append(cmd)
        self._follow(cmd, depth, upstream)
        return [cmd]

    def _unwrap(self, cmd: Command, upstream: Command | None) -> None:
        """Peel `env FOO=1 timeout 5 sudo -u x …` down to the command that really runs."""
        for _ in range(8):
            name = cmd.name
            if name in _RUNNERS and len(cmd.argv) > 1 and cmd.argv[1].text == _RUNNERS[name]:
                cmd.wrappers.append(name)
                rest = cmd.argv[2:]
                while rest and rest[0].text.startswith("-"):
                    takes = rest[0].text in ("-n", "--name", "-p", "--prefix", "--with", "-e")
                    rest = rest[2:] if takes else rest[1:]
                cmd.argv = rest
                cmd.rename()
                continue
            opts = _WRAPPERS.get(name)
            if opts is None or (
                name == "command" and any(w.text in ("-v", "-V") for w in cmd.argv[1:2])
            ):
                return
            rest = cmd.argv[1:]
            split: list[Word] = []
            while rest:
                t = rest[0].text
                if name == "env" and ("=" in t and not t.startswith("-")):
                    rest = rest[1:]
                elif name == "env" and t in ("-S", "--split-string") and len(rest) > 1:
                    split = [Word(x, rest[1].static) for x in _split(rest[1].text)]
                    rest = rest[2:]
                    break
                elif t.startswith("-") and t != "-":
                    rest = rest[2:] if t in opts else rest[1:]
                else:
                    break
            if name in _NUMERIC_FIRST and rest:
                rest = rest[1:]
            cmd.wrappers.append(name)
            if name == "xargs":
                cmd.xargs_from = upstream
                fed = decode.static_output(upstream) if upstream is not None else None
                if fed is not None:  # `echo --all | xargs git log`: the args are known
                    rest = rest + [Word(x) for x in _split(fed)[:256]]
            if name == "watch" and len(rest) == 1:  # watch joins and runs through sh -c
                rest = [Word("sh"), Word("-c"), rest[0]]
            if not split and not rest:  # bare `env`, `time`: the wrapper is the command
                cmd.wrappers.pop()
                return
            cmd.argv = split + rest
            cmd.rename()

    def _follow(self, cmd: Command, depth: int, upstream: Command | None = None) -> None:
        """Look inside what a command executes: shells, eval, python, cd."""
        name, args = cmd.name, cmd.args
        if name == "cd" or name == "pushd":
            target = args[0] if args else Word("~")
            if not target.static or target.text.startswith(("~", "-")):
                self.cwd = None
            elif self.cwd is not None:
                self.cwd = posixpath.normpath(posixpath.join(self.cwd or ".", target.text))
            return
        if name == "eval":
            self._exec_text(
                " ".join(w.text for w in args), all(w.static for w in args), cmd, depth, "eval"
            )
            return
        if name in SHELLS or (name == "busybox" and args and args[0].text in SHELLS):
            if name == "busybox":
                args = args[1:]
            code = _flag_value(args, "c")
            if code is not None:
                self._exec_text(
                    code.text, code.static, cmd, depth, f"{name} -c", decoded=code.decoded
                )
            elif not any(not w.text.startswith("-") for w in args):  # script on stdin
                self._exec_stdin(cmd, depth, name, upstream)
            return
        if name == "su" or name == "runuser" or name == "script":
            code = _option_value(args, ("-c", "--command"))
            if code is not None:
                self._exec_text(code.text, code.static, cmd, depth, f"{name} -c")
            return
        if name in PYTHONS or name.startswith(("python3.", "python2.", "pypy3.")):
            self._python(cmd, upstream)
            return
        lang_flag = FOREIGN.get(name)
        if lang_flag is not None:
            code = _option_value(args, (lang_flag, "-E", "--eval"))
            text = code.text if code is not None else cmd.stdin
            if text is not None:
                self.s.foreign.append((name, text))
                for inner in _foreign_shell(text):  # perl -e 'system("git log --all")'
                    self._exec_text(inner, True, cmd, depth, f"{name} system()")
            return
        if name == "find":  # -exec/-execdir/-ok run a command per file
            texts = [w.text for w in args]
            for i, t in enumerate(texts):
                if t in ("-exec", "-execdir", "-ok", "-okdir") and i + 1 < len(texts):
                    end = next(
                        (j for j in range(i + 1, len(texts)) if texts[j] in (";", "\\;", "+")),
                        len(texts),
                    )
                    inner = Command(
                        args[i + 1 : end],
                        cwd=cmd.cwd,
                        depth=depth,
                        background=cmd.background,
                        decoded=cmd.decoded,
                        xargs_from=cmd,
                        in_function=self.function,
                    )
                    self._unwrap(inner, cmd)
                    self.s.commands.append(inner)
                    self._follow(inner, depth)
        if (
            name == "git"
            and len(args) >= 3
            and args[0].text == "config"
            and args[1].text.startswith("alias.")
            and args[2].static
        ):
            value = args[2].text  # an alias is a command the agent runs later: screen it now
            if value.startswith("!"):
                self._exec_text(value[1:], True, cmd, depth, "git alias")
            else:
                alias = Command(
                    [Word("git"), *[Word(x) for x in _split(value)]],
                    cwd=cmd.cwd,
                    depth=depth + 1,
                    in_function=self.function,
                )
                self.s.commands.append(alias)

    def _exec_text(
        self, text: str, static: bool, cmd: Command, depth: int, how: str, decoded: bool = False
    ) -> None:
        if decoded or cmd.decoded:
            self.s.decoded_exec.append(f"{how} runs a decoded payload: {text[:120]!r}")
        if not static:
            # eval "$(pyenv init -)" is fine: the substituted command is itself screened;
            # only an unknown variable or unreadable text leaves us blind
            if "$(" not in text and "`" not in text or "$" in text.replace("$(", ""):
                self.s.dynamic_exec.append(f"{how} runs text only known at runtime: {text[:120]!r}")
            return
        saved = self.cwd
        self.run(text, depth + 1, decoded or cmd.decoded, cmd.background)
        if how != "eval":  # a child shell's `cd` does not move its parent
            self.cwd = saved

    def _exec_stdin(self, cmd: Command, depth: int, how: str, upstream: Command | None) -> None:
        if cmd.stdin is not None:
            self._exec_text(
                cmd.stdin, True, cmd, depth, f"{how} < stdin", decoded=_decoded(upstream)
            )
        elif cmd.stdin_from not in (None, "<<", "<<<"):
            self.s.dynamic_exec.append(f"{how} runs a script piped from `{cmd.stdin_from}`")

    def _python(self, cmd: Command, upstream: Command | None) -> None:
        args = cmd.args
        i = 0
        while i < len(args):
            t = args[i].text
            if t == "-c" and i + 1 < len(args):
                code = args[i + 1]
                if code.static:
                    self.s.python.append((code.text, "python -c"))
                    if code.decoded:
                        self.s.decoded_exec.append(
                            f"python -c runs a decoded payload: {code.text[:120]!r}"
                        )
                else:
                    self.s.dynamic_exec.append(f"python -c with runtime text: {code.text[:120]!r}")
                return
            if t.startswith("-c") and len(t) > 2:
                self.s.python.append((t[2:], "python -c"))
                return
            if t in ("-m", "-W", "-X", "-Q") and i + 1 < len(args):
                if t == "-m":
                    return
                i += 2
                continue
            if t == "-" or not t.startswith("-"):
                if t != "-":
                    return  # a script file: what it does is screened when it is written
                break
            i += 1
        if cmd.stdin is not None:
            self.s.python.append((cmd.stdin, f"python stdin ({cmd.stdin_from})"))
            if _decoded(upstream):
                self.s.decoded_exec.append("python runs a decoded payload from stdin")
        elif cmd.stdin_from not in (None, "<<", "<<<"):
            self.s.dynamic_exec.append(f"python runs code piped from `{cmd.stdin_from}`")

    # ------------------------------------------------------------------ words

    def words_of(self, node: Node, depth: int, decoded: bool) -> None:
        """Visit expansions inside a non-command node so `$(…)` there is screened too."""
        if not self._budget() or not self._enter():
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
        if not self._budget() or not self._enter():
            return Word(node.text.decode("utf-8", "replace")[:200], static=False)
        try:
            return self._word(node, depth, decoded)
        finally:
            self.level -= 1

    def _word(self, node: Node, depth: int, decoded: bool) -> Word:
        t = node.type
        raw = node.text.decode("utf-8", "surrogateescape")
        if t in ("word", "number"):
            return Word(_unescape_bare(raw))
        if t == "raw_string":
            return Word(raw[1:-1])
        if t == "ansi_c_string":
            return Word(decode.ansi_c(raw[2:-1]))
        if t in ("string", "concatenation", "translated_string"):
            parts = [
                self.string_part(c, depth, decoded) for c in node.named_children if c.type != '"'
            ]
            if t == "string" and not node.named_children:
                return Word("")
            return Word(
                "".join(p.text for p in parts),
                all(p.static for p in parts),
                any(p.decoded for p in parts),
            )
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
            if t == "command_substitution" and len(cmds) >= 1:
                out = decode.static_output(cmds[-1])
                if out is not None:
                    return Word(
                        out.rstrip("\n"), True, decoded=any(c.name in decode.DECODERS for c in cmds)
                    )
            return Word(raw, static=False)
        if t == "arithmetic_expansion":
            return Word(raw, static=False)
        if t == "array":
            return Word(" ".join(self.word(c, depth, decoded).text for c in node.named_children))
        self.words_of(node, depth, decoded)
        return Word(raw, static=not any(ch in raw for ch in "$`"))

    def string_part(self, node: Node, depth: int, decoded: bool) -> Word:
        if node.type == "string_content":
            return Word(_unescape_dquoted(node.text.decode("utf-8", "surrogateescape")))
        return self.word(node, depth, decoded)


# ---------------------------------------------------------------------- helpers


_FOREIGN_SHELL = re.compile(
    r"(?:system|exec|execSync|spawnSync|popen|qx|%x|shell_exec|passthru)\s*[({]?\s*"
    r"(['\"])(.+?)(?<!\\)\1|`([^`]+)`")


def _foreign_shell(code: str) -> list[str]:
    """Shell strings handed to system()/exec()/backticks by perl, ruby, node, php."""
    out = []
    for m in _FOREIGN_SHELL.finditer(code[:65536]):
        out.append(m.group(2) if m.group(2) is not None else m.group(3))
        if len(out) >= 16:
            break
    return out


def _decoded(upstream: Command | None) -> bool:
    return upstream is not None and (upstream.name in decode.DECODERS or upstream.decoded)


def _unescape_bare(s: str) -> str:
    if "\\" not in s:
        return s
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            if s[i + 1] != "\n":
                out.append(s[i + 1])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def _unescape_dquoted(s: str) -> str:
    if "\\" not in s:
        return s
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s) and s[i + 1] in '"\\$`\n':
            if s[i + 1] != "\n":
                out.append(s[i + 1])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def _var_name(node: Node) -> str | None:
    kids = node.named_children
    if len(kids) == 1 and kids[0].type == "variable_name":
        return kids[0].text.decode()
    return None


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _flag_value(args: list[Word], letter: str) -> Word | None:
    """The operand of `-c` in `bash -c`, `bash -lc`, `sh -ec` …"""
    for i, w in enumerate(args):
        t = w.text
        if t.startswith("-") and not t.startswith("--") and letter in t[1:] and i + 1 < len(args):
            return args[i + 1]
        if not t.startswith("-"):
            return None
    return None


def _option_value(args: list[Word], names: tuple[str, ...]) -> Word | None:
    for i, w in enumerate(args):
        if w.text in names and i + 1 < len(args):
            return args[i + 1]
        for n in names:
            if n.startswith("--") and w.text.startswith(n + "="):
                return Word(w.text[len(n) + 1 :], w.static)
    return None


def _count_values(values: list[Node]) -> int | None:
    if not values:
        return None
    total = 0
    for v in values:
        text = v.text.decode("utf-8", "replace")
        n = decode.range_size(text)
        total += n if n is not None else 1
    return total
