"""Agent actions as runner operations, and runner results as observations.

Interactive episodes run bash actions in a persistent shell (the working directory and
exported variables carry over to the next action); a one-shot solution's actions run as
separate commands.
"""

from __future__ import annotations

from typing import Any

from proctor.models import Action, BashAction, Observation, ReadFileAction, WriteFileAction
from workers.sandbox.sandbox import ERRNO_REASONS

SHELL_STATE = "/tmp/.proctor-shell"
ACTION_ENV = {"HOME": "/home/sandbox", "LANG": "C.UTF-8", "TERM": "dumb"}


def shell_command(command: str) -> str:
    """Wrap a bash action so `cd` and `export` persist into the next one."""
    return (
        f"mkdir -p {SHELL_STATE}; "
        f"[ -f {SHELL_STATE}/env ] && . {SHELL_STATE}/env >/dev/null 2>&1; "
        f"cd \"$(cat {SHELL_STATE}/cwd 2>/dev/null || echo /workspace)\" 2>/dev/null "
        "|| cd /workspace; "
        f"trap 'pwd > {SHELL_STATE}/cwd; export -p > {SHELL_STATE}/env' EXIT\n"
        f"{command}\n"
    )


def workspace_path(path: str) -> str:
    """Actions may name files relative to the workspace or absolutely inside it."""
    return path[len("/workspace/"):] if path.startswith("/workspace/") else path


def action_op(
    action: Action, *, output_bytes: int, max_timeout_s: float, persistent_shell: bool
) -> dict[str, Any]:
    if isinstance(action, BashAction):
        command = shell_command(action.command) if persistent_shell else action.command
        return {"op": "run", "command": command, "output_bytes": output_bytes,
                "timeout_s": min(action.timeout_s, max_timeout_s), "env": ACTION_ENV}
    if isinstance(action, WriteFileAction):
        return {"op": "write", "files": {workspace_path(action.path): action.content}}
    assert isinstance(action, ReadFileAction)
    return {"op": "read", "paths": [workspace_path(action.path)], "max_bytes": output_bytes}


def observation_of(action: Action, result: dict[str, Any] | None, error: str | None) -> Observation:
    if result is None or "error" in result:  # the operation raised (a refused fork, say)
        message = str((result or {}).get("error") or error or "not run")
        reason = ERRNO_REASONS.get((result or {}).get("errno") or -1)
        return Observation(stderr=f"{reason}: {message}" if reason else message, exit_code=1)
    if isinstance(action, BashAction):
        return Observation(
            output=result["stdout"], stderr=result["stderr"], exit_code=result["exit_code"],
            truncated=result["stdout_truncated"] or result["stderr_truncated"],
            timed_out=result["timed_out"], duration_s=result["duration_s"],
        )
    if isinstance(action, ReadFileAction):
        content = next(iter(result["files"].values()), None)
        if content is None:
            return Observation(stderr=f"{action.path}: No such file or directory", exit_code=1)
        return Observation(output=content, exit_code=0)
    return Observation(exit_code=0)
