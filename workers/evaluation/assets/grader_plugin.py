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

Code that runs in this process after arming (the solution the tests import, a conftest.py
the task keeps) meets the runtime defences (`grader_defences.py`), armed here before pytest
imports any test module: the key and the tally live only in the audit hook's closure, the
seal is written by the hook at `pytest_unconfigure` (a call from anywhere else is ignored),
the tests' `==` asserts go through the trusted comparison (pytest's assertion rewriting
routes them there), and what the solution reached for is sealed into the report as evidence.
What it cannot stop: a process of the sandbox uid that outlived the kill before grading
reading the key file in the moment before pytest starts; with a root sandbox user
"root-owned" no longer means "out of the code's reach".
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
    from importlib import metadata, util

    import pytest
finally:
    sys.path[:] = _SAVED_PATH

GRADER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY_FILE = os.path.join(GRADER_DIR, "key.json")
DEFENCES_FILE = os.path.join(GRADER_DIR, "defences.py")


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


def _load_defences() -> Any:
    name = f"{__name__}_defences"
    spec = util.spec_from_file_location(name, DEFENCES_FILE)
    if spec is None or spec.loader is None:
        raise ImportError(f"the grader's defences are missing ({DEFENCES_FILE})")
    module = util.module_from_spec(spec)
    sys.modules[name] = module  # the test modules import `checked_eq` from it
    spec.loader.exec_module(module)
    return module


def _rewrite_compares(defences: Any) -> None:
    """Route the test modules' `==` asserts through the defences' trusted comparison."""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return
    original = rewrite.rewrite_asserts
    module = defences.__name__

    def rewrite_asserts(
        mod: Any, source: bytes, module_path: Any = None, config: Any = None
    ) -> None:
        defences.rewrite_compares(mod, module)
        original(mod, source, module_path, config)

    rewrite.rewrite_asserts = rewrite_asserts
    defences.explain_as_comparison(rewrite.AssertionRewriter)


def _seal(
    config: dict[str, Any],
    key: bytes,
    tally: dict[str, Any],
    evidence: list[Any],
    *,
    ending: bool = False,
) -> None:
    """Seal the report; `ending` (solution code is ending the process before pytest wrote
    one): a report of the seal alone, over whatever is there, so its evidence arrives."""
    report = config.get("report")
    if not report:
        return
    body = b""
    if not ending:
        try:
            fd = os.open(report, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            pass  # no report: the worker says so
        else:
            with os.fdopen(fd, "rb") as handle:
                body = handle.read()
    seal = {
        "v": 1,
        "run": config.get("run"),
        "sha256": hashlib.sha256(body).hexdigest(),
        "exitstatus": tally["exitstatus"],
        "tests": len(tally["tests"]),
        "passed": len(tally["passed"] - tally["failed"]),
        "early": config.get("early", []),
        "evidence": evidence,
    }
    text = json.dumps(seal, sort_keys=True, separators=(",", ":")).encode()
    mac = hmac.new(key, text, hashlib.sha256).hexdigest().encode()
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_TRUNC if ending else os.O_APPEND)
    with contextlib.suppress(OSError), os.fdopen(os.open(report, flags, 0o600), "ab") as handle:
        handle.write(SEAL_MARK + text + b" " + mac + b" -->\n")


def _hide(paths: list[str]) -> None:
    """The hidden tests in this process alone: their text read into memory, their files
    emptied, before any code of the solution runs; pytest's assertion rewriting is given
    the text from memory, and tracebacks their lines (`linecache`). This process becomes
    non-dumpable first, so no process the solution starts can read its memory, environment
    or descriptors through /proc either. Without assertion rewriting (`--assert=plain`) the
    files are written back before collection (`pytest_configure`): their import reads the
    disk."""
    import ctypes
    import linecache
    import pathlib

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return
    for path in paths:
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
        except OSError:
            continue
        with os.fdopen(fd, "r+b") as handle:
            source = handle.read()
            handle.seek(0)
            handle.truncate()
        real = os.path.realpath(path)
        HIDDEN[real] = source
        lines = source.decode("utf-8", "replace").splitlines(True)
        linecache.cache[path] = linecache.cache[real] = (len(source), None, lines, real)
    original = rewrite._rewrite_test
    read_bytes = pathlib.Path.read_bytes

    def from_memory(self: Any) -> bytes:
        source = HIDDEN.get(os.path.realpath(str(self)))
        return source if source is not None else read_bytes(self)

    def rewrite_test(fn: Any, config: Any) -> Any:
        if os.path.realpath(str(fn)) not in HIDDEN:
            return original(fn, config)
        pathlib.Path.read_bytes = from_memory  # type: ignore[method-assign]
        try:
            return original(fn, config)
        finally:
            pathlib.Path.read_bytes = read_bytes  # type: ignore[method-assign]

    rewrite._rewrite_test = rewrite_test


HIDDEN: dict[str, bytes] = {}  # the hidden tests' text by real path (`_hide`)


def pytest_configure(config: Any) -> None:
    """Without assertion rewriting nothing reads the hidden tests from memory: write them back."""
    if config.getoption("assertmode", "rewrite") == "rewrite":
        return
    for path, source in HIDDEN.items():
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
            with os.fdopen(fd, "wb") as handle:
                handle.write(source)


def _arm() -> str:
    """Take the key, arm the defences; from here the key lives only in the audit hook."""
    config = _take_config()
    saved = list(sys.path)
    sys.path[:] = TRUSTED_PATH
    try:
        _hide([p for p in config.get("hidden", []) if isinstance(p, str)])
    finally:
        sys.path[:] = saved
    key = bytes.fromhex(config.pop("key")) if "key" in config else None
    config["early"] = _early_modules({os.path.realpath(p) for p in config.get("trusted_files", [])})
    tally: dict[str, Any] = {"exitstatus": None, "tests": set(), "failed": set(), "passed": set()}

    def on_finish(op: str, secret: bytes | None, evidence: list[Any], *args: Any) -> None:
        if op == "tally":
            nodeid, when, outcome = args
            tally["tests"].add(nodeid)
            if outcome == "failed":
                tally["failed"].add(nodeid)
            elif when == "call" and outcome == "passed":
                tally["passed"].add(nodeid)
        elif op == "status":
            tally["exitstatus"] = args[0]
        elif op in ("seal", "exit") and secret is not None:
            _seal(config, secret, tally, evidence, ending=op == "exit")

    saved = list(sys.path)
    sys.path[:] = TRUSTED_PATH
    try:
        defences = _load_defences()
        _rewrite_compares(defences)
    finally:
        sys.path[:] = saved
    parent = "_multicall"  # pluggy calls every hook implementation from there
    return str(
        defences.arm(
            secret=key,
            trusted=trusted,
            grader_dir=GRADER_DIR,
            test_files=config.get("trusted_files", []),
            strict=bool(config.get("strict")),
            callers={
                "tally": (pytest_runtest_logreport.__code__, parent),
                "status": (pytest_sessionfinish.__code__, parent),
                "seal": (pytest_unconfigure.__code__, parent),
            },
            on_finish=on_finish,
        )
    )


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


# where a skip raised while a test ran may come from: the tests (and what helps them)
TEST_DIRECTORIES = frozenset({"tests", "test", "testing"})


def _from_tests(path: str) -> bool:
    """A file of the tests: a hidden test, a test module or conftest by name, or a file in
    a tests directory."""
    real = os.path.realpath(path)
    name = os.path.basename(real)
    return (
        real in HIDDEN
        or name == "conftest.py"
        or (name.startswith("test") and name.endswith(".py"))
        or name.endswith("_test.py")
        or not TEST_DIRECTORIES.isdisjoint(real.split(os.sep))
    )


def _skip_origin(excinfo: Any) -> str | None:
    """Where a skip was raised: the innermost frame in a file the sandbox user could have
    written (pytest's `skip` and unittest's conversion are the image's own), or None."""
    origin = None
    tb = getattr(excinfo, "tb", None)
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename
        if not trusted(os.path.dirname(path) or "/"):
            origin = f"{path}:{tb.tb_lineno}"
        tb = tb.tb_next
    return origin


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    """A skip raised from the code under test (pytest's, unittest's, nose's) is a failure:
    a solution that skips the tests calling it has not passed them. Taken from the
    exception before pytest's own hooks convert it, since unittest's conversion re-raises
    it from pytest's code."""
    excinfo = call.excinfo
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.skipped or excinfo is None:
        return
    origin = _skip_origin(excinfo)
    if origin is None or _from_tests(origin.rsplit(":", 1)[0]):
        return
    report.outcome = "failed"
    reason = str(excinfo.value)[:500]
    report.longrepr = f"a skip raised by the code under test ({origin}): {reason}"


def pytest_runtest_logreport(report: Any) -> None:
    sys.audit(_CHANNEL, "tally", str(report.nodeid), str(report.when), str(report.outcome))
    if report.when == "teardown":
        sys.audit(_CHANNEL, "check")


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    sys.audit(_CHANNEL, "status", int(exitstatus))


def pytest_unconfigure(config: Any) -> None:
    """Seal the report pytest wrote (the audit hook does, with the key only it holds)."""
    sys.audit(_CHANNEL, "seal")


_CHANNEL = _arm()
