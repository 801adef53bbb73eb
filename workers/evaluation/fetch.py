"""Files read back after the tests (`TestSpec.fetch`, SandboxFusion's `fetch_files`).

One `Snapshot` operation at the end of the grading program, run as the episode's uid like
every other operation: regular files only (no symlink followed, no directory walked, nothing
of /proc or /sys), each at most the task's output limit, a missing one left out, as
SandboxFusion leaves it out. Paths are the workspace's (relative) or absolute under the
scratch mounts the episode owns.
"""

from __future__ import annotations

import base64
import posixpath

from proctor.models import TaskSpec
from workers.sandbox.protocol import WORKSPACE, Results, Snapshot


def fetch_op(task: TaskSpec) -> Snapshot | None:
    """The operation that reads `task.tests.fetch` back (None: nothing to read)."""
    if not task.tests.fetch:
        return None
    return Snapshot(
        paths=[_absolute(path).lstrip("/") for path in task.tests.fetch],
        root="/",
        max_bytes=task.limits.output_bytes,
        files_only=True,
    )


def fetched(task: TaskSpec, op: Snapshot | None, reply: Results) -> dict[str, str]:
    """path as the task named it → base64 content, for the files that were there."""
    done = reply.result(op) if op is not None else None
    if done is None:
        return {}
    found = {name: data.encode() for name, data in done.files.items()}
    found |= {name: base64.b64decode(data) for name, data in done.binary.items()}
    files: dict[str, str] = {}
    for path in task.tests.fetch:
        data = found.get(_absolute(path).lstrip("/"))
        if data is not None:
            files[path] = base64.b64encode(data).decode("ascii")
    return files


def _absolute(path: str) -> str:
    return posixpath.normpath(path if path.startswith("/") else posixpath.join(WORKSPACE, path))
