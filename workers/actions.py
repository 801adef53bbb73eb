"""Agent actions as runner operations, and runner results as observations.

Interactive episodes run bash actions in a persistent shell (the working directory and
exported variables carry over to the next action); a one-shot solution's actions run as
separate commands.
"""

from __future__ import annotations

from proctor.models import Action, BashAction, Observation, ReadFileAction, WriteFileAction
from workers.sandbox.protocol import (
    Read,
    ReadResult,
    Result,
    Run,
    RunnerError,
    RunResult,
    Write,
    WriteResult,
)
from workers.sandbox.sandbox import ERRNO_REASONS

SHELL_STATE = "/tmp/.proctor-shell"
ACTION_ENV = {"HOME": "/home/sandbox", "LANG": "C.UTF-8", "TERM": "dumb"}


def shell_command(command: str, state: str = SHELL_STATE) -> str:
    """Wrap a bash action so `cd` and `export` persist into the next one.

    The exported variables are kept as NUL-separated NAME=value records and restored one by
    one with `export`, never sourced: the agent can write the file (it is its own uid's),
    and sourced text would run in the next action unscreened. A name must be an identifier
    (an array subscript in it would be evaluated)."""
    restore = (
        f"[ -f {state}/env ] && while IFS= read -r -d '' kv; do "
        '[[ ${kv%%=*} =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] && export -- "$kv" 2>/dev/null; '
        f"done < {state}/env; "
    )
    save = (  # the EXIT trap's text: no single quote in it
        f"pwd > {state}/cwd; "
        f'for v in $(compgen -e); do printf "%s=%s\\0" "$v" "${{!v}}"; done > {state}/env'
    )
    return (
        f"mkdir -p {state}; {restore}"
        f'cd "$(cat {state}/cwd 2>/dev/null || echo /workspace)" 2>/dev/null || cd /workspace; '
        f"trap '{save}' EXIT\n"
        f"{command}\n"
    )


def workspace_path(path: str) -> str:
    """Actions may name files relative to the workspace or absolutely inside it."""
    return path[len("/workspace/") :] if path.startswith("/workspace/") else path


ActionOp = Run | Write | Read


def action_op(
    action: Action,
    *,
    output_bytes: int,
    max_timeout_s: float,
    persistent_shell: bool,
    keep_going: bool = False,
) -> ActionOp:
    """The runner operation of an agent action (`keep_going`: one of a one-shot solution's,
    whose failure must not skip the grading)."""
    if isinstance(action, BashAction):
        command = shell_command(action.command) if persistent_shell else action.command
        return Run(
            command=command,
            output_bytes=output_bytes,
            env=ACTION_ENV,
            timeout_s=min(action.timeout_s, max_timeout_s),
            keep_going=keep_going,
        )
    if isinstance(action, WriteFileAction):
        return Write(files={workspace_path(action.path): action.content}, keep_going=keep_going)
    assert isinstance(action, ReadFileAction)
    return Read(paths=[workspace_path(action.path)], max_bytes=output_bytes, keep_going=keep_going)


def observation_of(action: Action, result: Result | None, error: RunnerError | None) -> Observation:
    """What the agent sees of its action: `result` is the operation's (None: it did not
    run), `error` the one that stopped the program."""
    if result is None or isinstance(result, RunnerError):  # it raised (a refused fork, say)
        failure = result or error
        message = failure.message if failure is not None else "not run"
        reason = ERRNO_REASONS.get(result.errno) if result and result.errno else None
        return Observation(stderr=f"{reason}: {message}" if reason else message, exit_code=1)
    if isinstance(action, BashAction):
        assert isinstance(result, RunResult)
        return Observation(
            output=result.stdout,
            stderr=result.stderr,
            exit_code=result.exit_code,
            truncated=result.stdout_truncated or result.stderr_truncated,
            timed_out=result.timed_out,
            duration_s=result.duration_s,
        )
    if isinstance(action, ReadFileAction):
        assert isinstance(result, ReadResult)
        content = next(iter(result.files.values()), None)
        if content is None:
            return Observation(stderr=f"{action.path}: No such file or directory", exit_code=1)
        return Observation(output=content, exit_code=0)
    assert isinstance(result, WriteResult)
    return Observation(exit_code=0)
