"""The grader's pytest plugin, armed inside the sandbox before any workspace code runs.

This file is not imported by the worker: grading writes its source into the private grader
directory under a random module name and loads it with `-p` first among the command line's
plugins (the only ones before it come from the task's own `addopts`). Standard library only.

Why it exists: pytest, its JUnit report and the code under test share a process and a uid,
so a report can be rewritten after pytest wrote it (an atexit handler, a `__del__`, then
`os._exit(0)`). At import this plugin takes the per-run key and deletes the key file, so no
later process of the uid can read it; it loads the pytest plugins the image installed (entry
points of distributions in root-owned, read-only directories only, since autoloading is off
and the workspace is on `sys.path`); it tallies each test outcome as pytest reports it; and
at `pytest_unconfigure` it seals the report: an HMAC over the exact bytes pytest wrote, the
session's exit status, the live tally and the modules from writable places that were already
imported when it armed. The worker refuses a report whose seal is missing or wrong.

What it cannot stop: code that runs in this process after arming (the solution the tests
import, a conftest.py the task keeps) can read the key out of this module's memory, patch
pytest's reporting, or seal a report of its own. Denying that needs runtime audit hooks
(the next issue); until then the rule filter and the judge are what see such code. Nor can
it stop a process of the sandbox uid that outlived the kill before grading from reading the
key file in the moment before pytest starts, and with a root sandbox user "root-owned" no
longer means "out of the code's reach".
"""

from __future__ import annotations

import os
import sys
from typing import Any

# Directories the sandbox user can write, whatever their owner says.
WRITABLE_ROOTS = ("/workspace", "/tmp", "/var/tmp", "/dev/shm", "/home", "/run")
SEAL_MARK = b"\n<!-- proctor-seal "
_trust: dict[str, bool] = {}


def trusted(directory: str) -> bool:
    """A directory the sandbox user cannot have written: root's, read-only to others."""
    real = os.path.realpath(directory or os.getcwd())  # "" on sys.path is the cwd
    if real not in _trust:
        home = os.path.realpath(os.environ.get("HOME") or "/nonexistent")
        roots = (*WRITABLE_ROOTS, home)
        verdict = not any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots)
        probe = real
        while verdict:
            try:
                status = os.stat(probe)
            except OSError:
                verdict = False
                break
            if status.st_uid != 0 or status.st_mode & 0o022:
                verdict = False
            parent = os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
        _trust[real] = verdict
    return _trust[real]


_SAVED_PATH = list(sys.path)
TRUSTED_PATH = [p for p in _SAVED_PATH if trusted(p)]
# what is imported from here on comes from the image, not from a module the workspace shadows
sys.path[:] = TRUSTED_PATH
try:
    import contextlib
    import hashlib
    import hmac
    import json
    from importlib import metadata
finally:
    sys.path[:] = _SAVED_PATH

KEY_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "key.json")


def _take_config() -> dict[str, Any]:
    """Read the run's key and delete its file, so nothing started later can read it."""
    try:
        with open(KEY_FILE, "rb") as handle:
            config: dict[str, Any] = json.loads(handle.read())
        return config
    except (OSError, ValueError):
        return {}
    finally:
        with contextlib.suppress(OSError):
            os.unlink(KEY_FILE)


def _early_modules(allowed: set[str]) -> list[str]:
    """Modules already imported from places the sandbox user can write (ours aside)."""
    found = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name == __name__ or not isinstance(path, str):
            continue
        path = os.path.realpath(path)
        if path not in allowed and not trusted(os.path.dirname(path)):
            found.append(name)
    return sorted(found)[:20]


_CONFIG = _take_config()
_KEY: bytes | None = bytes.fromhex(_CONFIG["key"]) if "key" in _CONFIG else None
_EARLY = _early_modules({os.path.realpath(p) for p in _CONFIG.get("trusted_files", [])})
_STATE: dict[str, Any] = {"exitstatus": None, "tests": set(), "failed": set(), "passed": set()}


def pytest_addhooks(pluginmanager: Any) -> None:
    """Load the image's pytest plugins (what autoloading would have, minus the workspace)."""
    saved = list(sys.path)
    sys.path[:] = TRUSTED_PATH
    try:
        for dist in metadata.distributions(path=TRUSTED_PATH):
            for entry in dist.entry_points:
                if entry.group != "pytest11" or pluginmanager.is_blocked(entry.name):
                    continue
                if pluginmanager.get_plugin(entry.name) is not None:
                    continue
                hook = getattr(pluginmanager, "rewrite_hook", None)
                if hook is not None:
                    hook.mark_rewrite(entry.module.split(".")[0])
                plugin = entry.load()
                if not pluginmanager.is_registered(plugin):
                    pluginmanager.register(plugin, name=entry.name)
    finally:
        sys.path[:] = saved


def pytest_runtest_logreport(report: Any) -> None:
    nodeid = str(report.nodeid)
    _STATE["tests"].add(nodeid)
    if report.outcome == "failed":
        _STATE["failed"].add(nodeid)
    elif report.when == "call" and report.outcome == "passed":
        _STATE["passed"].add(nodeid)


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    _STATE["exitstatus"] = int(exitstatus)


def pytest_unconfigure(config: Any) -> None:
    """Seal the report pytest wrote; afterwards this process holds no key to seal with."""
    global _KEY
    key, _KEY = _KEY, None
    report = _CONFIG.get("report")
    if key is None or not report:
        return
    try:
        fd = os.open(report, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return  # no report: the worker says so
    with os.fdopen(fd, "rb") as handle:
        body = handle.read()
    seal = {
        "v": 1,
        "run": _CONFIG.get("run"),
        "sha256": hashlib.sha256(body).hexdigest(),
        "exitstatus": _STATE["exitstatus"],
        "tests": len(_STATE["tests"]),
        "passed": len(_STATE["passed"] - _STATE["failed"]),
        "early": _EARLY,
    }
    text = json.dumps(seal, sort_keys=True, separators=(",", ":")).encode()
    mac = hmac.new(key, text, hashlib.sha256).hexdigest().encode()
    with open(report, "ab") as handle:
        handle.write(SEAL_MARK + text + b" " + mac + b" -->\n")
