"""Completion nonces of the `assert` format, and the check of the marker that carries one.

A run's nonce is derived from a secret of this worker process and the run's public id (as the
grader plugin's key is, `report_seal.py`), so the scorer checks a marker with nothing but the
marker. The nonce reaches the sandbox once, in a file the bootstrap deletes before any
solution code runs (`assets/assert_bootstrap.py` says what that does and does not protect
against), and never comes back: the marker of a completed run carries an HMAC keyed by it
over the record (files run, the runtime defences' evidence), written only when the last
test program returned normally.
"""

from __future__ import annotations

import hmac
import json
import secrets
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from workers.evaluation.report_seal import evidence_lines, run_key

MARKER_NAME = "marker.json"
NONCE_NAME = "nonce.json"
_PURPOSE = "assert-nonce"


class MarkerError(ValueError):
    """No valid completion marker: the test programs did not run to their end."""


@dataclass(frozen=True, slots=True)
class Marker:
    """A valid marker (`completed`), or the bootstrap's record of what stopped the run."""

    completed: bool
    files: list[str] = field(default_factory=list)
    file: str | None = None  # the test file that raised
    exception: str | None = None  # its exception's type name
    message: str = ""
    evidence: list[str] = field(default_factory=list)  # what the runtime defences recorded


def nonce_of(run: str) -> str:
    return run_key(run, purpose=_PURPOSE).hex()


def new_run() -> tuple[str, str]:
    """A fresh run id (public) and its nonce (secret, for the sandbox's nonce file only)."""
    run = secrets.token_hex(16)
    return run, nonce_of(run)


@cache
def bootstrap_source() -> str:
    """The bootstrap's source, for the sandbox (it is never imported here)."""
    path = Path(__file__).with_name("assets") / "assert_bootstrap.py"
    return path.read_text(encoding="utf-8")


def read_marker(text: str | None) -> Marker:
    """What the bootstrap left; MarkerError when it attests nothing at all.

    The code under test can write the marker's file before it is killed, so anything
    there (nested past the recursion limit, of the wrong types) only fails the run."""
    try:
        return _read_marker(text)
    except MarkerError:
        raise
    except (RecursionError, ValueError, TypeError, AttributeError) as exc:
        raise MarkerError("the completion marker is not the bootstrap's") from exc


def _read_marker(text: str | None) -> Marker:
    if not text or not text.strip():
        raise MarkerError(
            "the test programs did not run to their end: no completion marker "
            "(the run exited, or was ended, before the last assertion)"
        )
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise MarkerError("the completion marker is not the bootstrap's") from exc
    if not isinstance(data, dict) or not isinstance(data.get("run"), str):
        raise MarkerError("the completion marker is not the bootstrap's")
    mac = data.pop("mac", None)
    if mac is None and isinstance(data.get("exception"), str):
        # unauthenticated, and it needs not be: it can only ever make the run fail
        return Marker(
            completed=False,
            file=str(data.get("file") or "") or None,
            exception=data["exception"],
            message=str(data.get("message") or ""),
            evidence=evidence_lines(data.get("evidence")),
        )
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    expected = hmac.new(nonce_of(data["run"]).encode(), text.encode(), "sha256").hexdigest()
    if not isinstance(mac, str) or not hmac.compare_digest(mac, expected):
        raise MarkerError("the completion marker is not authenticated with this run's nonce")
    files = data.get("files")
    return Marker(
        completed=True,
        files=[str(f) for f in files] if isinstance(files, list) else [],
        evidence=evidence_lines(data.get("evidence")),
    )
