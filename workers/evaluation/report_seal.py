"""Per-run keys for the grader plugin, and the check of the seal it puts on a JUnit report.

A run's key is derived from a secret of this worker process and the run's public id, so
the scorer can check a report with nothing but the report: no key travels beside it, and
none is stored. The key reaches the sandbox once, in a file the grader plugin deletes as it
arms (see `assets/grader_plugin.py` for what that does and does not protect against).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import py_compile
import re
import secrets
import sys
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

SEAL_MARK = "\n<!-- proctor-seal "
_SEAL_TAIL = re.compile(r"(\{[^\n]*\}) ([0-9a-f]{64}) -->\n?\Z")
# a command runs pytest when it names it; then its report must carry the plugin's seal
_RUNS_PYTEST = re.compile(r"\bpy\.?test\b")


class ReportSealBroken(ValueError):
    """The report is not the one the graded pytest session wrote: the run fails."""


@dataclass(frozen=True, slots=True)
class Seal:
    run: str
    exitstatus: int | None
    tests: int
    passed: int
    early: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)  # what the runtime defences recorded


@cache
def _worker_secret() -> bytes:
    return secrets.token_bytes(32)


def run_key(run: str, *, purpose: str = "grader-key") -> bytes:
    """The secret of a run for one purpose (the plugin's key, the completion nonce …)."""
    label = f"proctor-{purpose}:{run}".encode()
    return hmac.new(_worker_secret(), label, "sha256").digest()


def new_run() -> tuple[str, bytes]:
    """A fresh run id (public) and its key (secret, for the sandbox's key file only)."""
    run = secrets.token_hex(16)
    return run, run_key(run)


DEFENCES_NAME = "defences.py"  # beside the plugin's directory and the bootstrap


@cache
def defences_source() -> str:
    """The runtime defences' source (`assets/grader_defences.py`), for the sandbox only."""
    path = Path(__file__).with_name("assets") / "grader_defences.py"
    return path.read_text(encoding="utf-8")


@cache
def defences_bytecode() -> dict[str, bytes]:
    """The defences compiled once per worker, as the pyc (unchecked-hash: their source is
    never read again) an interpreter of this worker's version finds beside `defences.py`
    and loads without compiling it, ~4 ms of every test run. Path under the grader
    directory → content. Another version looks for another name, and compiles the source."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return {}
    with tempfile.TemporaryDirectory() as scratch:
        source, pyc = Path(scratch, DEFENCES_NAME), Path(scratch, "defences.pyc")
        source.write_text(defences_source(), encoding="utf-8")
        py_compile.compile(
            str(source),
            str(pyc),
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        data = pyc.read_bytes()
    return {f"__pycache__/{DEFENCES_NAME.removesuffix('.py')}.{tag}.pyc": data}


@cache
def plugin_source() -> str:
    """The grader plugin's source, for the sandbox (it is never imported here)."""
    return (Path(__file__).with_name("assets") / "grader_plugin.py").read_text(encoding="utf-8")


def runs_pytest(command: str | None) -> bool:
    """The default command and any that names pytest load the plugin, so must be sealed."""
    return command is None or bool(_RUNS_PYTEST.search(command))


def unseal(report: str) -> tuple[str, Seal]:
    """The report as pytest wrote it and its seal; ReportSealBroken when either does not hold
    (whatever the code under test wrote there: nested past the recursion limit, say)."""
    try:
        return _unseal(report)
    except ReportSealBroken:
        raise
    except (RecursionError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ReportSealBroken("the JUnit report's grader seal is malformed") from exc


def _unseal(report: str) -> tuple[str, Seal]:
    body, mark, tail = report.rpartition(SEAL_MARK)
    if not mark:
        raise ReportSealBroken(
            "the JUnit report carries no grader seal: the graded pytest "
            "session did not write it (or it was rewritten afterwards)"
        )
    found = _SEAL_TAIL.match(tail)
    if found is None:
        raise ReportSealBroken("the JUnit report's grader seal is malformed")
    text, mac = found.group(1), found.group(2)
    try:
        data = json.loads(text)
        run = str(data["run"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ReportSealBroken("the JUnit report's grader seal is malformed") from exc
    expected = hmac.new(run_key(run), text.encode(), "sha256").hexdigest()
    if not hmac.compare_digest(expected, mac):
        raise ReportSealBroken("the JUnit report's grader seal is not valid for this worker")
    if hashlib.sha256(body.encode("utf-8")).hexdigest() != data.get("sha256"):
        raise ReportSealBroken("the JUnit report was changed after the test session wrote it")
    exitstatus = data.get("exitstatus")
    return body, Seal(
        run=run,
        exitstatus=exitstatus if isinstance(exitstatus, int) else None,
        tests=int(data.get("tests", 0)),
        passed=int(data.get("passed", 0)),
        early=[str(m) for m in data.get("early", [])],
        evidence=evidence_lines(data.get("evidence")),
    )


def evidence_lines(items: object) -> list[str]:
    """The runtime defences' records as `kind: detail` lines (malformed ones dropped)."""
    if not isinstance(items, list):
        return []
    return [
        f"{item.get('kind')}: {item.get('detail')}"[:500]
        for item in items[:50]
        if isinstance(item, dict) and item.get("kind")
    ]
