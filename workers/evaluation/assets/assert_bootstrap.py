"""The `assert` format's bootstrap: runs the test programs, and only after the last one
returned normally writes a marker authenticated with the run's nonce where the worker
reads it.

This file is not imported by the worker: grading writes it into the private grader directory
(0700) under a random name, beside `nonce.json`, and runs `python3 -I -B <this file> <test
files>` from /workspace after every process of the code under test was killed. Standard
library only.

Before any workspace code runs it takes the run's id, nonce and marker path from
`nonce.json` and deletes the file (as the grader plugin does with its key), opens the marker
file (not inheritable by programs it starts), makes itself non-dumpable (a child process can
neither read its memory nor ptrace it) and arms the runtime defences (`grader_defences.py`):
from then on the nonce lives only in the audit hook's closure. Each test file runs as
`__main__`, its directory and the workspace first on `sys.path` (`import solution` works),
its asserts' `==` routed through the trusted comparison. Only when the last one returned does
the hook write the marker: the record (files run, the defences' evidence) and an HMAC keyed
by the nonce; then the process ends at once (`os._exit`), so no `atexit` handler or `__del__`
of the solution runs after it. Whatever ends the run earlier — `sys.exit(0)` or `raise
SystemExit` at import or in the function under test, `os._exit(0)`, a signal, an exception
an excepthook swallows — leaves no authenticated marker, and the worker scores the run a
failure (a cheat, when the defences saw the exit). On an exception it records which and
re-raises it, so the traceback and the exit status stay the program's.

What it cannot stop: a solution that the tests run as a child process (stdin/stdout cases)
starts without the hook, but also without any way into this process.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import hashlib
import hmac
import json
import os
import stat
import sys
import types
from importlib import util
from typing import Any

PR_SET_DUMPABLE = 4
MAX_MESSAGE_CHARS = 2000
HERE = os.path.dirname(os.path.abspath(__file__))
NONCE_FILE = os.path.join(HERE, "nonce.json")
DEFENCES_FILE = os.path.join(HERE, "defences.py")
WRITABLE_ROOTS = ("/workspace", "/tmp", "/var/tmp", "/dev/shm", "/home", "/run")


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


def trusted(directory: str) -> bool:
    """A directory the sandbox user cannot have written: root's, read-only to others."""
    real = os.path.realpath(directory or os.getcwd())
    if any(real == r or real.startswith(r + "/") for r in WRITABLE_ROOTS):
        return False
    probe = real
    while True:
        try:
            status = os.stat(probe)
        except OSError:
            return False
        if status.st_uid != 0 or status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return False
        parent = os.path.dirname(probe)
        if parent == probe:
            return True
        probe = parent


def _load_defences() -> Any:
    spec = util.spec_from_file_location("_proctor_defences", DEFENCES_FILE)
    if spec is None or spec.loader is None:
        raise ImportError(f"the grader's defences are missing ({DEFENCES_FILE})")
    module = util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _run(path: str, workspace: str, defences: Any) -> None:
    """Run one test file as `__main__`, as `python3 path` would (its directory on sys.path),
    its asserts' `==` routed through the defences' trusted comparison."""
    real = os.path.abspath(path)
    with open(real, "rb") as handle:
        source = handle.read()
    tree = defences.rewrite_compares(ast.parse(source, path))
    code = compile(tree, path, "exec")
    module = types.ModuleType("__main__")
    module.__file__ = real
    module.__dict__[defences.EQ_NAME] = defences.checked_eq
    sys.modules["__main__"] = module
    sys.argv = [path]
    for entry in (workspace, os.path.dirname(real)):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    exec(code, module.__dict__)
    sys.audit(defences.CHANNEL, "check", True)


def _arm(config: dict[str, Any], paths: list[str], defences: Any) -> None:
    """Arm the defences; from here the nonce lives only in the audit hook's closure."""
    fd = _open_marker(config.get("marker"))
    run, nonce = config.get("run"), config.get("nonce")
    strict = bool(config.get("strict", True))
    config.clear()

    def on_finish(op: str, secret: str | None, evidence: list[Any], *args: Any) -> None:
        if op == "finish" and secret is not None:
            record = {"run": run, "files": list(args[0]), "evidence": evidence}
            text = json.dumps(record, sort_keys=True, separators=(",", ":"))
            mac = hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()
            _write(fd, {**record, "mac": mac})
        elif op in ("failed", "exit"):
            exception, message, file = args if op == "failed" else ("SystemExit", "", "")
            _write(
                fd,
                {
                    "run": run,
                    "file": file,
                    "exception": exception,
                    "message": str(message)[:MAX_MESSAGE_CHARS],
                    "evidence": evidence,
                },
            )

    # whatever started this file (nothing in a fresh interpreter; the runner, when it runs
    # the bootstrap in a fork of itself) is below the run: its frames are not the solution's
    launcher, frame = [], sys._getframe(2).f_back  # 0: _arm, 1: main, 2: this module
    while frame is not None:
        launcher.append(frame)
        frame = frame.f_back
    defences.arm(
        secret=nonce,
        trusted=trusted,
        grader_dir=HERE,
        test_files=[os.path.abspath(p) for p in paths],
        strict=strict,
        callers={"finish": (main.__code__, "<module>"), "failed": (main.__code__, "<module>")},
        on_finish=on_finish,
        launcher=launcher,
    )


def main(paths: list[str]) -> None:
    config = _take_config()
    _undumpable()
    defences = _load_defences()
    _arm(config, paths, defences)
    workspace = os.getcwd()
    current = ""
    try:
        for current in paths:
            _run(current, workspace, defences)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: none is a pass
        sys.audit(defences.CHANNEL, "failed", type(exc).__name__, str(exc), current)
        raise
    sys.audit(defences.CHANNEL, "finish", list(paths))
    # nothing of the solution runs after the marker: no atexit handler, no `__del__`
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
