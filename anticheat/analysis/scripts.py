"""Which files a command runs as a script: `bash x.sh`, `python t.py`, `./run`, `make`.

A script written in one action and run in a later one is screened when it runs, as it is
then: the analysis names the files (`ScriptRun`), the worker reads them from the sandbox,
and `facts.analyze(action, scripts=…)` screens their text as if the action had written it.
Only static paths are named, normalised against where the action starts (`~/…` kept), and
only where a file can have been written by the agent — relative paths, or absolute ones
under the sandbox's writable mounts; the image itself is read-only.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from anticheat.analysis.bash.interpreters import PYTHONS, SHELLS
from anticheat.analysis.bash.syntax import Command, Word
from anticheat.analysis.operations import norm_path

__all__ = ["WRITABLE", "ScriptRun", "make_recipes", "script_runs"]

# Where the code under test can write (the workspace, its home, the scratch mounts).
WRITABLE = ("/workspace", "/tmp", "/home/sandbox", "/dev/shm", "~")


@dataclass(frozen=True, slots=True)
class ScriptRun:
    path: str  # normalised against the action's starting directory; `~/…` kept
    how: str  # the command that runs it, for the evidence: "python t.py", "./x.sh", "make"
    lang: str  # "sh" | "py" | "exec" (its first line decides) | "make"


# Python options that take a value (`-X dev`, `-W error`); `-c`/`-m` end the options.
_PY_VALUE = frozenset("XW")
_SH_VALUE = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
_MAKEFILES = ("GNUmakefile", "makefile", "Makefile")


def script_runs(cmd: Command) -> list[ScriptRun]:
    """The files `cmd` runs as scripts (candidates: the ones that exist are what run)."""
    if not cmd.argv or not cmd.argv[0].static:
        return []
    name = cmd.name
    if name in SHELLS:
        return _shell(cmd)
    if name in ("source", "."):
        first = cmd.args[0] if cmd.args else None
        return _runs(cmd, first, "sh")
    if name in PYTHONS or name.startswith("python3."):
        return _python(cmd)
    if name == "make" or name == "gmake":
        return _make(cmd)
    text = cmd.argv[0].text
    if "/" in text and "xargs" not in cmd.wrappers:  # ./x.sh, bin/run, /tmp/t
        return _runs(cmd, cmd.argv[0], "exec", how=text)
    return []


def _runs(cmd: Command, word: Word | None, lang: str, *, how: str | None = None) -> list[ScriptRun]:
    if word is None or not word.static or not word.text or word.text == "-":
        return []
    path = _path(word.text, cmd.cwd)
    if path is None:
        return []
    shown = how if how is not None else f"{cmd.name} {word.text}"
    return [ScriptRun(path, shown, lang)]


def _path(text: str, cwd: str | None) -> str | None:
    if text.startswith("~") and not text.startswith("~/"):
        return None  # ~user: another user's home
    if cwd is None and not text.startswith(("/", "~")):
        return None  # relative to a directory only known at runtime
    path = norm_path(text, cwd)
    if not path:
        return None
    if path.startswith("/") and not any(path == w or path.startswith(w + "/") for w in WRITABLE):
        return None  # part of the read-only image: not written by the agent
    return path


def _stdin_script(cmd: Command, lang: str) -> list[ScriptRun]:
    """`bash < x.sh`, `python < t.py`: the script comes on stdin."""
    if "xargs" in cmd.wrappers:
        return []
    for r in cmd.redirects:
        if r.op == "<" and r.fd in (None, "0"):
            return _runs(cmd, r.target, lang, how=f"{cmd.name} < {r.target.text}")
    return []


def _shell(cmd: Command) -> list[ScriptRun]:
    args = cmd.args
    i = 0
    while i < len(args):
        t = args[i].text
        if not args[i].static:
            return []
        if t == "--":
            i += 1
            break
        if t in _SH_VALUE:
            i += 2
            continue
        if t.startswith(("-", "+")) and len(t) > 1:
            if not t.startswith("--") and "c" in t[1:]:
                return []  # inline code: screened as such
            if not t.startswith("--") and "s" in t[1:]:
                return _stdin_script(cmd, "sh")  # commands from stdin
            i += 1
            continue
        break
    if i < len(args):
        return _runs(cmd, args[i], "sh")
    return _stdin_script(cmd, "sh")


def _python(cmd: Command) -> list[ScriptRun]:
    args = cmd.args
    i = 0
    while i < len(args):
        t = args[i].text
        if not args[i].static:
            return []
        if t == "--":
            i += 1
            break
        if t.startswith("--"):
            i += 2 if t == "--check-hash-based-pycs" else 1
            continue
        if not t.startswith("-") or t == "-":
            break
        for j, letter in enumerate(t[1:], start=1):
            if letter == "c":
                return []  # inline code: screened as `python -c`
            if letter == "m":
                module = t[j + 1 :] or (args[i + 1].text if i + 1 < len(args) else "")
                static = bool(t[j + 1 :]) or (i + 1 < len(args) and args[i + 1].static)
                return _module(cmd, module) if static else []
            if letter in _PY_VALUE:
                i += 0 if t[j + 1 :] else 1
                break
        i += 1
    if i < len(args):
        word = args[i]
        if word.text.endswith((".py", ".pyw")):
            return _runs(cmd, word, "py")
        # a directory or zip file runs its __main__.py; anything else is read as Python
        main = Word(posixpath.join(word.text, "__main__.py"), word.static)
        return [*_runs(cmd, word, "py"), *_runs(cmd, main, "py", how=f"{cmd.name} {word.text}")]
    return _stdin_script(cmd, "py")


_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


def _module(cmd: Command, module: str) -> list[ScriptRun]:
    """`python -m pkg.tool` runs a local module first (the working directory leads
    sys.path): `pkg/__init__.py`, then `pkg/tool.py` or `pkg/tool/__main__.py`."""
    if not _MODULE.match(module):
        return []
    how = f"{cmd.name} -m {module}"
    parts = module.split(".")
    files = [posixpath.join(*parts[:k], "__init__.py") for k in range(1, len(parts))]
    base = posixpath.join(*parts)
    files += [f"{base}.py", f"{base}/__init__.py", f"{base}/__main__.py"]
    return [run for f in files for run in _runs(cmd, Word(f), "py", how=how)]


def _make(cmd: Command) -> list[ScriptRun]:
    """`make` reads its makefile from `-C dir`, or the one `-f` names."""
    args, directory, named = cmd.args, "", None
    for i, w in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else None
        if w.text in ("-C", "--directory") and nxt is not None:
            if not nxt.static:
                return []
            directory = posixpath.join(directory, nxt.text)
        elif w.text.startswith("--directory="):
            directory = posixpath.join(directory, w.text.split("=", 1)[1])
        elif w.text in ("-f", "--file", "--makefile") and nxt is not None:
            named = nxt
        elif w.text.startswith(("--file=", "--makefile=")):
            named = Word(w.text.split("=", 1)[1], w.static)
    files = [named] if named is not None else [Word(m) for m in _MAKEFILES]
    out = []
    for f in files:
        if not f.static:
            return []
        word = Word(posixpath.join(directory, f.text) if directory else f.text)
        out += _runs(cmd, word, "make", how=" ".join(w.text for w in cmd.argv)[:80])
    return out


_SHELL_CALL = re.compile(r"\$[({]shell\s+([^()]*(?:\([^()]*\)[^()]*)*)[)}]")
_MAKE_VAR = re.compile(r"\$[({]([^$(){}]*)[)}]|\$([A-Za-z@<^+*?%])")


def make_recipes(content: str) -> str:
    """A makefile's commands as one shell script: its recipe lines (`$$` unescaped, make
    variables left as shell variables) and its `$(shell …)` calls."""
    lines: list[str] = []
    joined = content.replace("\\\n", " ")
    for line in joined.splitlines():
        for call in _SHELL_CALL.findall(line):
            lines.append(call)
        if line.startswith("\t"):
            body = line[1:].lstrip("@+- \t")
            if body:
                lines.append(body)
    script = "\n".join(lines).replace("$$", "\0")
    script = _MAKE_VAR.sub(lambda m: "${MAKE_" + _var_name(m.group(1) or m.group(2)) + "}", script)
    return script.replace("\0", "$")


def _var_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text.split(":", 1)[0].strip()) or "VAR"
