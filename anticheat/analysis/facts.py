"""What an action does, in terms the rules reason about: files, network, git, packages.

`analyze(action)` turns a bash command (via `bash.parser`), a written file (via `python` when
it is Python) or a read into `Facts`: file operations with resolved paths and, when
known, the content written; network endpoints; git invocations; package-manager calls;
and the Python analyses. Rules match on these, never on the raw text.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field

from anticheat.analysis import limits
from anticheat.analysis.bash.interpreters import SHELLS
from anticheat.analysis.bash.parser import parse_script
from anticheat.analysis.bash.syntax import Command, Script
from anticheat.analysis.command_table import command_effects
from anticheat.analysis.operations import FileOp, GitCall, NetOp, Operations, PkgOp, norm_path
from anticheat.analysis.python.analyzer import analyze_python
from anticheat.analysis.python.facts import PyFacts
from anticheat.analysis.scripts import ScriptRun, make_recipes, script_runs
from proctor.models import BashAction, ReadFileAction, WriteFileAction

__all__ = [
    "Facts",
    "FileOp",
    "GitCall",
    "NetOp",
    "PkgOp",
    "PySource",
    "ScriptRun",
    "analyze",
    "norm_path",
]

Action = BashAction | WriteFileAction | ReadFileAction


@dataclass(frozen=True, slots=True)
class PySource:
    facts: PyFacts
    origin: str  # "python -c", a file path…
    executed: bool  # runs now (snippet) rather than being written for later
    path: str | None = None


@dataclass(slots=True)
class Facts(Operations):
    """Everything the rules know about one action."""

    kind: str = "bash"  # bash | write | read
    script: Script | None = None
    commands: list[Command] = field(default_factory=list)
    python: list[PySource] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)  # where a cap of `limits` was reached
    # files the action runs as scripts and did not write itself: what runs is what they
    # hold now, so the worker reads them and screens again with `scripts`
    runs: list[ScriptRun] = field(default_factory=list)
    # their text as the sandbox holds it (None: there, but not readable in full)
    scripts: Mapping[str, str | None] = field(default_factory=dict)


def analyze(action: Action, scripts: Mapping[str, str | None] | None = None) -> Facts:
    """The facts of one action, within one budget of host work (`limits`). `scripts`: the
    files it runs (`Facts.runs`) as they are now, by path, screened as if written by it."""
    with limits.scope() as budget:
        facts = _analyze(action, scripts or {})
        facts.limits = list(budget.gave_up)
    return facts


def _analyze(action: Action, scripts: Mapping[str, str | None]) -> Facts:
    if isinstance(action, BashAction):
        facts = Facts(kind="bash", scripts=scripts)
        _bash(facts, action.command, depth=0)
        return facts
    if isinstance(action, WriteFileAction):
        facts = Facts(kind="write")
        path = norm_path(action.path)
        facts.files.append(
            FileOp(
                "write", path, True, f"write_file {action.path}", action.content, protected_ok=True
            )
        )
        _written_code(facts, path, action.content, 0)
        return facts
    facts = Facts(kind="read")
    facts.files.append(FileOp("read", norm_path(action.path), True, f"read_file {action.path}"))
    return facts


def _bash(facts: Facts, command: str, depth: int) -> None:
    script = parse_script(command)
    if facts.script is None:
        facts.script = script
    elif depth > 0:  # loops and functions of nested scripts count too
        facts.script.loops.extend(script.loops)
        facts.script.functions.update(script.functions)
        facts.script.decoded_exec.extend(script.decoded_exec)
        facts.script.dynamic_exec.extend(script.dynamic_exec)
        facts.script.foreign.extend(script.foreign)
    facts.problems.extend(script.problems)
    files_before = len(facts.files)
    for cmd in script.commands:
        facts.commands.append(cmd)
        command_effects(facts, cmd)
    for code, origin in script.python:
        _add_python(facts, PySource(analyze_python(code), origin, True), depth)
    written: dict[str, str] = {}
    replaced: set[str] = set()  # written whole by this action: what it held before is moot
    unknown: set[str] = set()  # written by this action with text only known at runtime
    for op in facts.files[files_before:]:  # `cat > conftest.py <<EOF` is a write_file too
        if op.kind not in ("write", "append"):
            continue
        if op.content is None:
            unknown.add(op.path)
            continue
        _written_code(facts, op.path, op.content, depth)
        if op.kind == "write" and op.path not in written:
            replaced.add(op.path)
        written[op.path] = written.get(op.path, "") + op.content
    if depth < 2:
        _run_scripts(facts, script, written, replaced, unknown, depth)


def _run_scripts(
    facts: Facts,
    script: Script,
    written: dict[str, str],
    replaced: set[str],
    unknown: set[str],
    depth: int,
) -> None:
    """What a script runs, it runs now: one written by this action (`cat > /tmp/x <<EOF …
    EOF; bash /tmp/x`), or one already in the sandbox (`bash x.sh`, written by an earlier
    action, by any tool), screened as it is now (`facts.scripts`)."""
    for cmd in script.commands:
        for run in script_runs(cmd):
            if run.path in replaced:
                content = written[run.path]
                # a `.sh`/`.py` this action wrote was screened as it was written
                seen = run.path.endswith((".sh", ".bash")) and run.lang in ("sh", "exec")
                if not seen:
                    _run_script(facts, run, content, depth)
                continue
            facts.runs.append(run)
            if run.path in unknown:
                limits.current().give_up(
                    f"`{run.how}` runs {run.path}, which this action writes with text only "
                    "known at runtime"
                )
            if run.path in facts.scripts and facts.scripts[run.path] is None:
                limits.current().give_up(
                    f"`{run.how}` runs {run.path}, which could not be read in full (too big, "
                    "a link or not a regular file): what it runs was not screened"
                )
                continue
            # not read (yet), or no such file: what this action appends is all that is known
            content = (facts.scripts.get(run.path) or "") + written.get(run.path, "")
            if content:
                _run_script(facts, run, content, depth)


def _run_script(facts: Facts, run: ScriptRun, content: str, depth: int) -> None:
    lang = run.lang
    if lang == "exec":  # run by its path: the kernel reads its first line
        if "\0" in content[:4096]:
            return  # a compiled program: not a script
        first = content.split("\n", 1)[0] if content.startswith("#!") else ""
        if "python" in first:
            lang = "py"
        elif first and not any(sh in first for sh in SHELLS):
            return  # perl, node…: another language's script
        else:
            lang = "sh"
    if lang == "py":
        # judged as a written file is (a dynamic subprocess call in a repro script is no
        # evasion), plus the files it touches now, as a snippet's are
        src = PySource(analyze_python(content), run.how, False, run.path)
        _add_python(facts, src, depth)
        _python_files(facts, src)
    elif lang == "make":
        _bash(facts, make_recipes(content), depth + 1)
    else:
        _bash(facts, content, depth + 1)


def _add_python(facts: Facts, src: PySource, depth: int) -> None:
    facts.python.append(src)
    if src.executed:  # what a snippet touches now; a written file is judged by its analysis
        _python_effects(facts, src)
    else:  # …but where written code will connect to is known now, when it is a constant
        for api, targets, _dynamic, how in src.facts.network:
            for t in targets:
                facts.net.append(NetOp(f"python:{api}", t, f"{src.origin}: {how}", src.path))
    for text, static, _how in src.facts.shell:
        if static and depth < 2:
            _bash(facts, text, depth + 1)  # subprocess.run(['git', 'log', '--all'])


def _written_code(facts: Facts, path: str, content: str, depth: int) -> None:
    """A file written now runs later: screen Python and shell scripts as they are written."""
    if (
        path.endswith((".py", ".pyw", ".pth"))
        or posixpath.basename(path) in ("sitecustomize", "conftest")
        or (content.startswith("#!") and "python" in content.split("\n", 1)[0])
    ):
        _add_python(facts, PySource(analyze_python(content), path, False, path), depth)
    elif depth < 2 and (
        path.endswith((".sh", ".bash"))
        or content.startswith(
            ("#!/bin/sh", "#!/bin/bash", "#!/usr/bin/env bash", "#!/usr/bin/env sh")
        )
    ):
        _bash(facts, content, depth + 1)


def _python_effects(facts: Facts, src: PySource) -> None:
    _python_files(facts, src)
    for api, targets, _dynamic, how in src.facts.network:
        for t in targets or src.facts.urls or [""]:
            facts.net.append(NetOp(f"python:{api}", t, f"{src.origin}: {how}"))


def _python_files(facts: Facts, src: PySource) -> None:
    for kind, path, how in src.facts.files:
        facts.files.append(
            FileOp(kind, norm_path(path) if path else "", path is not None, f"{src.origin}: {how}")
        )
