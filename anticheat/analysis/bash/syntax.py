"""Simple commands as the rule filter sees them: the data model `parser` produces.

`Word`, `Redirect`, `Loop`, `Command` and `Script`, and the word-level helpers (quote
removal, splitting a static text into words, reading an option's value) that the parser,
the interpreters and the command tables share.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from anticheat.analysis import limits
from anticheat.analysis.limits import MAX_WORD_SPLIT

__all__ = [
    "Command",
    "Loop",
    "Redirect",
    "Script",
    "Word",
    "flag_value",
    "option_value",
    "split_words",
    "unescape_bare",
    "unescape_dquoted",
]


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word. `static` is false when it depends on a runtime expansion."""

    text: str
    static: bool = True
    decoded: bool = False  # the value was recovered by statically decoding a payload
    payload: str | None = None  # for `<(…)`: what the substituted file holds, when static


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
        if self.argv:
            text = self.argv[0].text
            self.name = text[text.rfind("/") + 1 :]  # posixpath.basename, without its checks
        else:
            self.name = ""

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
    computed: dict[str, str] = field(default_factory=dict)  # var -> its runtime value's source
    problems: list[str] = field(default_factory=list)


def unescape_bare(s: str) -> str:
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


def unescape_dquoted(s: str) -> str:
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


def split_words(text: str) -> list[str]:
    """Shell words of a static text; of its first MAX_WORD_SPLIT characters (shlex is slow)."""
    if len(text) > MAX_WORD_SPLIT:
        limits.current().give_up(
            f"{len(text):,} characters to split into words: only the first "
            f"{MAX_WORD_SPLIT:,} were screened"
        )
        text = text[:MAX_WORD_SPLIT]
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def flag_value(args: list[Word], letter: str) -> Word | None:
    """The operand of `-c` in `bash -c`, `bash -lc`, `sh -ec` …"""
    for i, w in enumerate(args):
        t = w.text
        if t.startswith("-") and not t.startswith("--") and letter in t[1:] and i + 1 < len(args):
            return args[i + 1]
        if not t.startswith("-"):
            return None
    return None


def option_value(args: list[Word], names: tuple[str, ...]) -> Word | None:
    for i, w in enumerate(args):
        if w.text in names and i + 1 < len(args):
            return args[i + 1]
        for n in names:
            if n.startswith("--") and w.text.startswith(n + "="):
                return Word(w.text[len(n) + 1 :], w.static)
    return None
