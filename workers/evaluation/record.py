"""The record of a split run's grader (`assets/split_grader.py`), read by the worker.

The grader writes it to a pipe that only it holds, in a process of a uid of its own that
the code under test can neither signal, trace nor read, so the record needs no seal or
nonce: nothing else could have written it. The text is still parsed as untrusted (the
tests it ran may have broken the grader): anything but a well-formed record is a
`RecordError`, which scores the run a failure, never our infrastructure's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from proctor.models import TestCase, TestOutcome
from workers.evaluation.junit import MAX_MESSAGE_CHARS, Report
from workers.evaluation.marker import Marker

MAX_RECORD_CHARS = 8 << 20
MAX_CASES = 100_000


class RecordError(ValueError):
    """No well-formed record: the grader did not end its run."""


@dataclass(frozen=True, slots=True)
class CaseRecord:
    """The `functions` shape: one case per test function, as pytest's report would have."""

    report: Report
    gone: str  # why the solution's process was gone before the end ("" if it was not)


def read_record(text: str | None) -> Marker | CaseRecord:
    """The `programs` shape as a `Marker` (a completion, or what stopped the run), the
    `functions` shape as its cases."""
    if not text or not text.strip():
        raise RecordError("the grader wrote no record: its run did not end")
    if len(text) > MAX_RECORD_CHARS:
        raise RecordError("the grader's record is too large")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise RecordError("the grader's record is not JSON") from exc
    if not isinstance(data, dict):
        raise RecordError("the grader's record is not an object")
    if "cases" in data:
        return _cases(data)
    if data.get("completed") is True:
        return Marker(completed=True, files=_strings(data.get("files")))
    if data.get("completed") is False:
        return Marker(
            completed=False,
            file=_text(data.get("file")) or None,
            exception=_text(data.get("exception")) or "Exception",
            message=_text(data.get("message")),
        )
    raise RecordError("the grader's record says neither a completion nor its cases")


def _cases(data: dict[str, object]) -> CaseRecord:
    raw = data.get("cases")
    if not isinstance(raw, list) or len(raw) > MAX_CASES:
        raise RecordError("the grader's cases are not a list")
    cases: list[TestCase] = []
    collection: list[str] = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise RecordError("a case of the grader's record is malformed")
        try:
            outcome = TestOutcome(str(item.get("outcome")))
        except ValueError as exc:
            raise RecordError("a case of the grader's record has no outcome") from exc
        message = item.get("message")
        case = TestCase(
            name=item["name"][:MAX_MESSAGE_CHARS],
            outcome=outcome,
            message=message[:MAX_MESSAGE_CHARS] if isinstance(message, str) else None,
        )
        cases.append(case)
        if item.get("collection") is True:
            collection.append(case.name)
    return CaseRecord(Report(cases=cases, collection_errors=collection), _text(data.get("gone")))


def _text(value: object) -> str:
    return value[:MAX_MESSAGE_CHARS] if isinstance(value, str) else ""


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
