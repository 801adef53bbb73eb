"""Answers for intercepted actions: the observation a clean, sealed sandbox would give.

    obs = respond(action, verdict, context=ResponseContext(task=task, run_sanitized=run))

An intercepted action is never executed. For a bash command the responder replays its
top-level structure (`;`, `&&`, `||`, pipes, `2>/dev/null`, `echo`) with each offending
simple command replaced by what the real tool prints when the thing it reaches for is not
there (`fakes`), so `curl … || echo offline` still prints `offline` and exit codes match
the real tools. A read-only git history command is answered by the worker's
`run_sanitized(command)` hook with a command the responder builds (`history.py`), run in
the sealed repository; the agent's own text never runs. When the structure cannot be
replayed, the first offending command's fake is returned alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from anticheat.analysis.bash import decoding
from anticheat.analysis.bash.parser import Outline, Shape, outline, parse_script
from anticheat.analysis.facts import analyze
from anticheat.context import GitOracle
from anticheat.response.fakes import Runner, fake_for, missing_file
from anticheat.screen import screen_detailed
from proctor.models import (
    Action,
    BashAction,
    Decision,
    Observation,
    ReadFileAction,
    ScreenVerdict,
    TaskContext,
    WriteFileAction,
)

__all__ = ["ResponseContext", "respond"]

_MAX_REPLAY = 64 * 1024
_NOOPS = frozenset(
    {
        "cd",
        "export",
        "set",
        "unset",
        "true",
        ":",
        "shopt",
        "alias",
        "pushd",
        "popd",
        "hash",
        "ulimit",
        "umask",
        "trap",
        "wait",
        "sleep",
    }
)


@dataclass(frozen=True, slots=True)
class ResponseContext:
    """What the worker lends the responder.

    `run_sanitized(command)` runs a read-only git command built by the responder (never
    the agent's) in the sealed repository — the base commit's past and the episode's own
    work — and returns what it printed, or None when there is no repository.
    """

    task: TaskContext | None = None
    run_sanitized: Runner | None = None
    git: GitOracle | None = None
    disabled: frozenset[str] = field(default_factory=frozenset)


def respond(
    action: Action, verdict: ScreenVerdict, *, context: ResponseContext | None = None
) -> Observation:
    """The fake observation for an intercepted action (never executes anything)."""
    ctx = context or ResponseContext()
    if verdict.decision is Decision.allow:
        raise ValueError("respond() is for intercepted actions; allowed ones run")
    category = verdict.category
    if isinstance(action, WriteFileAction):
        return Observation(output="", exit_code=0)  # not applied; a write prints nothing
    if isinstance(action, ReadFileAction):
        return missing_file(analyze(action))
    assert isinstance(action, BashAction)
    replayed = _Replay(ctx, action.timeout_s).run(action.command)
    if replayed is not None:
        return replayed
    # cannot replay the whole: answer as the first offending top-level command would
    for cmd in parse_script(action.command).commands:
        if cmd.depth == 0 and cmd.end > cmd.start:
            part = action.command.encode()[cmd.start : cmd.end].decode("utf-8", "replace")
            s = screen_detailed(
                BashAction(command=part, timeout_s=action.timeout_s),
                ctx.task,
                git=ctx.git,
                disabled=ctx.disabled,
                first_only=True,
            )
            if s.verdict.decision is Decision.intercept:
                return fake_for(
                    s.verdict.category or category,
                    s.facts,
                    task=ctx.task,
                    command=part,
                    run=ctx.run_sanitized,
                    timeout_s=action.timeout_s,
                )
    return fake_for(
        category,
        analyze(action),
        task=ctx.task,
        command=action.command,
        run=ctx.run_sanitized,
        timeout_s=action.timeout_s,
    )


@dataclass(slots=True)
class _Result:
    out: str = ""
    err: str = ""
    code: int = 0
    timed_out: bool = False


class _Unknown(Exception):
    """A part of the command whose output cannot be known without running it."""


class _Replay:
    def __init__(self, ctx: ResponseContext, timeout_s: float) -> None:
        self.ctx = ctx
        self.timeout_s = timeout_s
        self.faked = False

    def run(self, command: str) -> Observation | None:
        if len(command) > _MAX_REPLAY:
            return None
        root = outline(command)
        if root is None:
            return None
        try:
            total = self.stmt(root, None)
        except _Unknown:
            return None
        if not self.faked:
            return None
        if total.timed_out:
            return Observation(
                output=total.out,
                stderr=total.err,
                exit_code=None,
                timed_out=True,
                duration_s=self.timeout_s,
            )
        return Observation(output=total.out, stderr=total.err, exit_code=total.code)

    def seq(self, node: Outline, stdin: str | None) -> _Result:
        total = _Result()
        for child in node.parts:
            r = self.stmt(child, stdin)
            if child.background:
                r.code = 0  # a background job: the prompt comes back at once
            total.out += r.out
            total.err += r.err
            total.code = r.code
            if r.timed_out:
                total.timed_out = True
                break
        return total

    def stmt(self, node: Outline, stdin: str | None) -> _Result:
        kind = node.kind
        if kind is Shape.list:
            left = self.stmt(node.parts[0], stdin)
            if left.timed_out:
                return left
            op = node.text
            if (op == "&&" and left.code == 0) or (op == "||" and left.code != 0):
                right = self.stmt(node.parts[1], stdin)
                return _Result(
                    left.out + right.out, left.err + right.err, right.code, right.timed_out
                )
            return left
        if kind is Shape.pipe:
            err, data, last = "", stdin, _Result()
            for stage in node.parts:
                last = self.stmt(stage, data)
                err += last.err
                data = last.out
                if last.timed_out:
                    break
            return _Result(last.out, err, last.code, last.timed_out)
        if kind is Shape.redirected:
            return self.redirected(node, stdin)
        if kind is Shape.seq:
            return self.seq(node, stdin)
        if kind is Shape.negated:
            r = self.stmt(node.parts[0], stdin)
            r.code = 0 if r.code else 1
            return r
        if kind is Shape.command:
            return self.command(node.text, stdin)
        if kind is Shape.assign:
            return _Result()
        raise _Unknown(node.text)

    def redirected(self, node: Outline, stdin: str | None) -> _Result:
        r = self.stmt(node.parts[0], stdin)
        for redirect in node.redirects:
            text = redirect.replace(" ", "")
            if re.fullmatch(r"2>&1", text):
                r.out, r.err = r.out + r.err, ""
            elif text.startswith(("&>", ">&")) and not text[2:].isdigit():
                r.out, r.err = "", ""
            elif text.startswith("2>"):
                r.err = ""
            elif text.startswith((">", "1>", ">>", "1>>")):
                r.out = ""  # into a file (or /dev/null): not on the terminal
            elif text.startswith("<"):
                raise _Unknown("input redirect")
        return r

    def command(self, text: str, stdin: str | None) -> _Result:
        screening = screen_detailed(
            BashAction(command=text, timeout_s=self.timeout_s),
            self.ctx.task,
            git=self.ctx.git,
            disabled=self.ctx.disabled,
            first_only=True,
        )
        verdict = screening.verdict
        if verdict.decision is Decision.intercept:
            self.faked = True
            obs = fake_for(
                verdict.category,
                screening.facts,
                task=self.ctx.task,
                command=text,
                run=self.ctx.run_sanitized,
                timeout_s=self.timeout_s,
            )
            return _Result(
                obs.output,
                obs.stderr,
                obs.exit_code if obs.exit_code is not None else 124,
                obs.timed_out,
            )
        script = parse_script(text)
        if len(script.commands) != 1:
            raise _Unknown("nested")
        cmd = script.commands[0]
        if stdin is not None:
            cmd.stdin = stdin
        static = decoding.static_output(cmd)
        if static is not None and cmd.name in ("echo", "printf", "base64", "rev", "tr", "cat"):
            return _Result(static)
        if cmd.name in _NOOPS and not cmd.background:
            return _Result()
        if cmd.name == "false":
            return _Result(code=1)
        if cmd.name == "exit":
            args = cmd.texts()
            return _Result(code=int(args[0]) if args and args[0].isdigit() else 0)
        if stdin is not None and self.faked:
            return _consume(cmd.name, cmd.texts(), stdin)
        raise _Unknown(cmd.name)


def _consume(name: str, args: list[str], data: str) -> _Result:
    """A pipeline consumer fed the (usually empty) output of a faked command."""
    lines = data.splitlines()
    flags = {a for a in args if a.startswith("-")}
    if name in ("cat", "less", "more", "tee", "sort", "uniq"):
        if name == "sort":
            lines = sorted(lines)
        return _Result("".join(line + "\n" for line in lines))
    if name in ("head", "tail"):
        n = 10
        for i, a in enumerate(args):
            if a == "-n" and i + 1 < len(args) and args[i + 1].lstrip("+-").isdigit():
                n = int(args[i + 1].lstrip("+-"))
            elif re.fullmatch(r"-n?\d+", a):
                n = int(a.lstrip("-n"))
        picked = lines[:n] if name == "head" else lines[-n:] if n else []
        return _Result("".join(line + "\n" for line in picked))
    if name == "wc":
        if "-l" in flags:
            return _Result(f"{len(lines)}\n")
        if "-c" in flags:
            return _Result(f"{len(data.encode())}\n")
        return _Result(f"{len(lines):7d} {len(data.split()):7d} {len(data.encode()):7d}\n")
    if name in ("grep", "egrep", "fgrep"):
        if not data:
            return _Result(code=1)
        raise _Unknown("grep over output")
    if name in ("sh", "bash", "python", "python3", "jq", "xxd", "base64") and not data:
        return _Result()
    if name == "git" and args[:1] in (["apply"], ["am"]) and not data:
        return _Result(
            err='error: No valid patches in input (allow with "--allow-empty")\n', code=128
        )
    if name == "tar" and not data:
        return _Result(
            err="tar: This does not look like a tar archive\ntar: Exiting with "
            "failure status due to previous errors\n",
            code=2,
        )
    raise _Unknown(name)
