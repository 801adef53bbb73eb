"""What an action does, in terms the rules reason about: files, network, git, packages.

`analyze(action)` turns a bash command (via `bash.parser`), a written file (via `python` when
it is Python) or a read into `Facts`: file operations with resolved paths and, when
known, the content written; network endpoints; git invocations; package-manager calls;
and the Python analyses. Rules match on these, never on the raw text.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from anticheat.analysis import limits
from anticheat.analysis.bash.interpreters import PYTHONS, SHELLS
from anticheat.analysis.bash.parser import parse_script
from anticheat.analysis.bash.syntax import Command, Script
from anticheat.analysis.command_table import command_effects
from anticheat.analysis.operations import FileOp, GitCall, NetOp, Operations, PkgOp, norm_path
from anticheat.analysis.python.analyzer import analyze_python
from anticheat.analysis.python.facts import PyFacts
from proctor.models import BashAction, ReadFileAction, WriteFileAction

__all__ = ["Facts", "FileOp", "GitCall", "NetOp", "PkgOp", "PySource", "analyze", "norm_path"]

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


def analyze(action: Action) -> Facts:
    """The facts of one action, within one budget of host work (`limits`)."""
    with limits.scope() as budget:
        facts = _analyze(action)
        facts.limits = list(budget.gave_up)
    return facts


def _analyze(action: Action) -> Facts:
    if isinstance(action, BashAction):
        facts = Facts(kind="bash")
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
    for op in facts.files[files_before:]:  # `cat > conftest.py <<EOF` is a write_file too
        if op.kind in ("write", "append") and op.content is not None:
            _written_code(facts, op.path, op.content, depth)
            written[op.path] = written.get(op.path, "") + op.content
    if written and depth < 2:
        _run_written(facts, script, written, depth)


def _run_written(facts: Facts, script: Script, written: dict[str, str], depth: int) -> None:
    """`cat > /tmp/x <<EOF … EOF; bash /tmp/x`: what the script runs, it runs now."""
    for cmd in script.commands:
        operands = [w for w in cmd.args if not w.text.startswith("-")]
        if not operands or not operands[0].static:
            continue
        content = written.get(norm_path(operands[0].text, cmd.cwd))
        if content is None:
            continue
        if cmd.name in SHELLS or cmd.name in ("source", "."):
            if not operands[0].text.endswith((".sh", ".bash")):  # those were screened already
                _bash(facts, content, depth + 1)
        elif cmd.name in PYTHONS or cmd.name.startswith("python3."):
            src = PySource(analyze_python(content), f"python {operands[0].text}", True)
            _add_python(facts, src, depth)


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
    for kind, path, how in src.facts.files:
        facts.files.append(
            FileOp(kind, norm_path(path) if path else "", path is not None, f"{src.origin}: {how}")
        )
    for api, targets, _dynamic, how in src.facts.network:
        for t in targets or src.facts.urls or [""]:
            facts.net.append(NetOp(f"python:{api}", t, f"{src.origin}: {how}"))
