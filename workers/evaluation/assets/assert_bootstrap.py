"""The `assert` format's bootstrap: runs the test programs, and only after the last one
returned normally writes the run's completion nonce where the worker reads it.

This file is not imported by the worker: grading writes it into the private grader directory
(0700) under a random name, beside `nonce.json`, and runs `python3 -I -B <this file> <test
files>` from /workspace after every process of the code under test was killed. Standard
library only.

Before any workspace code runs it takes the run's id, nonce and marker path from
`nonce.json` and deletes the file (as the grader plugin does with its key), opens the marker
file (not inheritable by programs it starts) and makes itself non-dumpable, so a solution the
tests run as a child process can neither read this process's memory nor ptrace it. Then each
test file runs as `__main__`, its directory and the workspace first on `sys.path` (`import
solution` works). Only when the last one returned is the nonce written: whatever ends the run
earlier — `sys.exit(0)` or `raise SystemExit` at import or in the function under test,
`os._exit(0)`, a signal, an exception an excepthook swallows, an `atexit` handler — leaves no
nonce, and the worker scores the run a failure. On an exception it records which (without the
nonce) and re-raises it, so the traceback and the exit status stay the program's.

What it cannot stop (the same as the pytest grader plugin, `grader_plugin.py`): code running
in this process, or in a fork of it — the solution the tests import — can find the nonce in
memory (its frames, `gc`), patch the tests' assertions or builtins, or write the marker
itself. The marker says control reached the end of the tests, not that nothing in-process
bent the way there; the rule filter and the judge are what see such code. A solution that the
tests run as a child process (stdin/stdout cases) has no such reach.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
import types
from typing import Any

PR_SET_DUMPABLE = 4
MAX_MESSAGE_CHARS = 2000
NONCE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nonce.json")


def _take_config() -> dict[str, Any]:
    """Read the run's nonce and delete its file, so nothing started later can read it."""
    try:
        with open(NONCE_FILE, "rb") as handle:
            config: dict[str, Any] = json.loads(handle.read())
        return config
    except (OSError, ValueError):
        return {}
    finally:
        with contextlib.suppress(OSError):
            os.unlink(NONCE_FILE)


def _undumpable() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def _open_marker(path: object) -> int | None:
    if not isinstance(path, str):
        return None
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(path, flags, 0o600)
    except OSError:
        return None


def _write(fd: int | None, record: dict[str, Any]) -> None:
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.write(fd, json.dumps(record).encode())
        os.close(fd)


def _run(path: str, workspace: str) -> None:
    """Run one test file as `__main__`, as `python3 path` would (its directory on sys.path)."""
    real = os.path.abspath(path)
    with open(real, "rb") as handle:
        code = compile(handle.read(), path, "exec")
    module = types.ModuleType("__main__")
    module.__file__ = real
    sys.modules["__main__"] = module
    sys.argv = [path]
    for entry in (workspace, os.path.dirname(real)):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    exec(code, module.__dict__)


def main(paths: list[str]) -> None:
    config = _take_config()
    _undumpable()
    fd = _open_marker(config.get("marker"))
    run, nonce = config.get("run"), config.get("nonce")
    config.clear()
    workspace = os.getcwd()
    current = ""
    try:
        for current in paths:
            _run(current, workspace)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: none is a pass
        nonce = None
        text = str(exc)
        _write(
            fd,
            {
                "run": run,
                "file": current,
                "exception": type(exc).__name__,
                "message": text[:MAX_MESSAGE_CHARS],
            },
        )
        raise
    _write(fd, {"run": run, "nonce": nonce, "files": paths})


if __name__ == "__main__":
    main(sys.argv[1:])
