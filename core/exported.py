"""A finished episode as a dataset row: the one shape the export and the durable sink write.

A monitor trainer or a notebook reads the task, what the code did (the solution, or an
interactive episode's steps with their observations), the grade, and the cheat evidence
with its categories as labels (`proctor.models.EpisodeExport` is its typed schema).

Rows are built from the JSON as stored (the request and the terminal result), not from the
validated models: an export streams thousands of rows a second, and validating a request
again (its files, archives, paths) would cost more than the rest of a row together. The unit
tests check that every row built here validates as an `EpisodeExport`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

# the result fields a row copies as they are (EpisodeExport's names)
_FROM_RESULT = (
    "id",
    "status",
    "mode",
    "verdict",
    "reward",
    "passed",
    "reason",
    "error",
    "metadata",
    "created_at",
    "finished_at",
    "steps",
    "tests",
    "exit_code",
    "stdout",
    "stderr",
    "timings",
    "sandbox",
)


_EMPTY: dict[str, Any] = {
    "steps": list,
    "tests": list,
    "reason": str,
    "stdout": str,
    "stderr": str,
    "timings": dict,
    "sandbox": dict,
}


def cheat_labels(evidence: list[Mapping[str, Any]]) -> list[str]:
    """The distinct categories of the evidence, in the order first seen."""
    return list(dict.fromkeys(str(e.get("category")) for e in evidence if e.get("category")))


def export_row(request: Mapping[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """The dataset row of a finished episode, from its request and result as JSON objects
    (`result` becomes the row: its fields are the row's, with the cheat report flattened)."""
    row = result
    for name in _FROM_RESULT:
        if row.get(name) is None:
            row[name] = _EMPTY[name]() if name in _EMPTY else None
    row["metadata"] = row["metadata"] or request.get("metadata") or {}
    row["mode"] = row["mode"] or request.get("mode", "oneshot")
    row["task"] = request.get("task")
    row["solution"] = request.get("solution")
    cheat = row.pop("cheat", None) or {}
    evidence = cheat.get("evidence") or []
    row["cheat_detected"] = bool(cheat.get("detected"))
    row["cheat_labels"] = cheat_labels(evidence)
    row["evidence"] = evidence
    row["judge"] = cheat.get("judge")
    return row


def export_line(request_json: str | bytes, result_json: str | bytes) -> bytes:
    """One JSON line (UTF-8, with its newline) from the request and result as stored."""
    row = export_row(orjson.loads(request_json), orjson.loads(result_json))
    return orjson.dumps(row) + b"\n"
