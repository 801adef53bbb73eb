"""What running a command means: the wrappers peeled off it and the code it runs inline.

The wrappers peeled off a command line (`env`, `timeout`, `sudo`, `xargs`, `uv run` …) so
the command that really runs is the one judged, and `Interpreters`: following a command
into the code it runs inline (`sh -c`, `eval`, `python -c`, `perl -e 'system(…)'`, `find
-exec`, git aliases). Mixed into the walker of `parser`.
"""

# ruff: noqa: SIM905 -- tables of names read best as one whitespace-separated string

from __future__ import annotations

import posixpath
import re

from anticheat.analysis.bash import decoding
from anticheat.analysis.bash.syntax import (
    Command,
    Script,
    Word,
    flag_value,
    option_value,
    split_words,
)
from anticheat.analysis.limits import MAX_FOREIGN_SCAN

__all__ = [
    "FOREIGN",
    "PYTHONS",
    "SHELLS",
    "Interpreters",
    "foreign_shell",
    "from_decoder",
    "unwrap",
]

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
        ("-I -n -P -L -d -a -s -E --max-args --max-procs --delimiter --arg-file --replace").split()
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
# every command `Interpreters._follow` looks into (the rest run no code of their own)
_PYTHON_PREFIXES = ("python3.", "python2.", "pypy3.")
_FOLLOWED = frozenset(
    {"cd", "pushd", "eval", "busybox", "source", ".", "su", "runuser", "script", "find", "git"}
    | SHELLS
    | PYTHONS
    | FOREIGN.keys()
)
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


def unwrap(cmd: Command, upstream: Command | None) -> None:
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
                split = [Word(x, rest[1].static) for x in split_words(rest[1].text)]
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
            fed = decoding.static_output(upstream) if upstream is not None else None
            if fed is not None:  # `echo --all | xargs git log`: the args are known
                rest = rest + [Word(x) for x in split_words(fed)[:256]]
        if name == "watch" and len(rest) == 1:  # watch joins and runs through sh -c
            rest = [Word("sh"), Word("-c"), rest[0]]
        if not split and not rest:  # bare `env`, `time`: the wrapper is the command
            cmd.wrappers.pop()
            return
        cmd.argv = split + rest
        cmd.rename()


class Interpreters:
    """Walker half that follows a command into the code it executes (mixed into `parser`)."""

    s: Script
    cwd: str | None
    function: str | None

    def run(self, source: str, depth: int, decoded: bool = False, bg: bool = False) -> None:
        raise NotImplementedError

    def _follow(self, cmd: Command, depth: int, upstream: Command | None = None) -> None:
        """Look inside what a command executes: shells, eval, python, cd."""
        name = cmd.name
        if name not in _FOLLOWED and not name.startswith(_PYTHON_PREFIXES):
            return  # none of the cases below: most commands run no code of their own
        args = cmd.args
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
            code = flag_value(args, "c")
            if code is not None:
                self._exec_text(
                    code.text, code.static, cmd, depth, f"{name} -c", decoded=code.decoded
                )
            elif not any(not w.text.startswith("-") for w in args):  # script on stdin
                self._exec_stdin(cmd, depth, name, upstream)
            else:
                script = next(w for w in args if not w.text.startswith("-"))
                if script.payload is not None:  # bash <(echo … | base64 -d)
                    self._exec_text(
                        script.payload, True, cmd, depth, f"{name} <(…)", decoded=script.decoded
                    )
            return
        if name in ("source", ".") and args and args[0].payload is not None:
            self._exec_text(
                args[0].payload, True, cmd, depth, f"{name} <(…)", decoded=args[0].decoded
            )
            return
        if name == "su" or name == "runuser" or name == "script":
            code = option_value(args, ("-c", "--command"))
            if code is not None:
                self._exec_text(code.text, code.static, cmd, depth, f"{name} -c")
            return
        if name in PYTHONS or name.startswith(_PYTHON_PREFIXES):
            self._python(cmd, upstream)
            return
        lang_flag = FOREIGN.get(name)
        if lang_flag is not None:
            code = option_value(args, (lang_flag, "-E", "--eval"))
            text = code.text if code is not None else cmd.stdin
            if text is not None:
                self.s.foreign.append((name, text))
                for shell_text in foreign_shell(text):  # perl -e 'system("git log --all")'
                    self._exec_text(shell_text, True, cmd, depth, f"{name} system()")
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
                    unwrap(inner, cmd)
                    self.s.commands.append(inner)
                    self._follow(inner, depth)
        value = _git_alias(args) if name == "git" else None
        if value is not None:
            # an alias is a command the agent runs (now, or later): screen it as one
            if value.startswith("!"):
                self._exec_text(value[1:], True, cmd, depth, "git alias")
            else:
                alias = Command(
                    [Word("git"), *[Word(x) for x in split_words(value)]],
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
            if ("$(" not in text and "`" not in text) or "$" in text.replace("$(", ""):
                self.s.dynamic_exec.append(f"{how} runs text only known at runtime: {text[:120]!r}")
            return
        saved = self.cwd
        self.run(text, depth + 1, decoded or cmd.decoded, cmd.background)
        if how != "eval":  # a child shell's `cd` does not move its parent
            self.cwd = saved

    def _exec_stdin(self, cmd: Command, depth: int, how: str, upstream: Command | None) -> None:
        if cmd.stdin is not None:
            self._exec_text(
                cmd.stdin, True, cmd, depth, f"{how} < stdin", decoded=from_decoder(upstream)
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
                if args[i].payload is not None:  # python <(…)
                    self.s.python.append((args[i].payload or "", "python <(…)"))
                if t != "-":
                    return  # a script file: what it does is screened when it is written
                break
            i += 1
        if cmd.stdin is not None:
            self.s.python.append((cmd.stdin, f"python stdin ({cmd.stdin_from})"))
            if from_decoder(upstream):
                self.s.decoded_exec.append("python runs a decoded payload from stdin")
        elif cmd.stdin_from not in (None, "<<", "<<<"):
            self.s.dynamic_exec.append(f"python runs code piped from `{cmd.stdin_from}`")


_FOREIGN_SHELL = re.compile(
    r"(?:system|exec|execSync|spawnSync|popen|qx|%x|shell_exec|passthru)\s*[({]?\s*"
    r"(['\"])(.+?)(?<!\\)\1|`([^`]+)`"
)


def foreign_shell(code: str) -> list[str]:
    """Shell strings handed to system()/exec()/backticks by perl, ruby, node, php."""
    out = []
    for m in _FOREIGN_SHELL.finditer(code[:MAX_FOREIGN_SCAN]):
        out.append(m.group(2) if m.group(2) is not None else m.group(3))
        if len(out) >= 16:
            break
    return out


def from_decoder(upstream: Command | None) -> bool:
    return upstream is not None and (upstream.name in decoding.DECODERS or upstream.decoded)


_CONFIG_SCOPES = frozenset("--global --local --system --worktree --add --replace-all".split())


def _git_alias(args: list[Word]) -> str | None:
    """The body of an alias this git call defines (`git config [--global] alias.x …`) or
    defines and runs at once (`git -c alias.x='log --all' x`)."""
    i, defined = 0, {}
    while i < len(args) and args[i].text.startswith("-"):
        t = args[i].text
        if t == "-c" and i + 1 < len(args) and args[i + 1].static:
            key, _, body = args[i + 1].text.partition("=")
            if key.lower().startswith("alias."):
                defined[key[6:]] = body
            i += 2
        elif t in ("-C", "--git-dir", "--work-tree", "--namespace", "--exec-path"):
            i += 2
        else:
            i += 1
    rest = args[i:]
    if rest and rest[0].text in defined:
        return defined[rest[0].text]
    if not rest or rest[0].text != "config":
        return None
    words = [w for w in rest[1:] if w.text not in _CONFIG_SCOPES]
    if len(words) >= 2 and words[0].text.lower().startswith("alias.") and words[1].static:
        return words[1].text
    return None
