"""The durable sink's files, as a dataset: how they are named, and reading them back.

Each worker process appends the rows of the episodes it ends (`EpisodeExport`, one JSON
object a line) to files of its own, so lines of two writers never interleave:

    {directory}/episodes-{YYYY-MM-DD}-{writer}-{seq:05d}.jsonl

A new file starts each UTC day and whenever the current one reaches its size bound.
Reading needs nothing but the standard library (and the files), so `proctor export
--from-sink DIR` works long after Redis let the episodes expire, without a service.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

FILE_PATTERN = re.compile(r"^episodes-(\d{4}-\d{2}-\d{2})-([A-Za-z0-9_.-]+)-(\d{5})\.jsonl$")


def file_name(day: str, writer: str, seq: int) -> str:
    """The name of a writer's `seq`-th file of `day` (YYYY-MM-DD, UTC)."""
    return f"episodes-{day}-{safe_writer(writer)}-{seq:05d}.jsonl"


def safe_writer(writer: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", writer)[:100] or "writer"


def sink_files(directory: Path) -> list[Path]:
    """The sink's files, oldest day first (then writer, then sequence)."""
    found = []
    for path in directory.iterdir():
        match = FILE_PATTERN.match(path.name)
        if match:
            day, writer, seq = match.groups()
            found.append(((day, writer, int(seq)), path))
    return [path for _, path in sorted(found)]


class FilterError(ValueError):
    """A filter that does not parse; the message says which and why."""


def parse_time(value: str | None, name: str) -> datetime | None:
    """An ISO 8601 time (a naive one is UTC) or unix seconds; None stays None."""
    if value is None or value == "":
        return None
    try:
        moment = datetime.fromtimestamp(float(value), UTC)
    except ValueError:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise FilterError(
                f"{name}: {value!r} is neither an ISO 8601 time nor unix seconds"
            ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class RowFilter:
    """Which finished episodes an export keeps: by verdict, and by when they ended."""

    verdicts: frozenset[str] = field(default_factory=frozenset)  # empty: every verdict
    since: datetime | None = None  # finished at or after
    until: datetime | None = None  # finished before

    def __post_init__(self) -> None:
        if self.since and self.until and self.since >= self.until:
            raise FilterError(f"since ({self.since}) is not before until ({self.until})")

    def keeps(self, row: dict[str, Any]) -> bool:
        if self.verdicts and str(row.get("verdict")) not in self.verdicts:
            return False
        if self.since is None and self.until is None:
            return True
        raw = row.get("finished_at")
        if not raw:
            return False
        finished = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
        if finished.tzinfo is None:
            finished = finished.replace(tzinfo=UTC)
        if self.since and finished < self.since:
            return False
        return not (self.until and finished >= self.until)


def read_rows(paths: Iterable[Path], row_filter: RowFilter) -> Iterator[dict[str, Any]]:
    """The rows of the files the filter keeps, one file at a time; a torn last line (its
    writer killed mid-write) is skipped. A row is written once: only the writer whose
    terminal result was stored (`EpisodeStore.finish`) writes it."""
    for path in paths:
        with path.open("rb") as lines:
            for line in lines:
                if not line.endswith(b"\n"):
                    continue  # torn: its writer died before the newline
                row = json.loads(line)
                if row_filter.keeps(row):
                    yield row


def jsonl_chunks(pages: Iterable[list[dict[str, Any]]]) -> Iterator[bytes]:
    """JSON Lines, one chunk per page of rows."""
    for page in pages:
        yield "".join(
            json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in page
        ).encode()


# Parquet columns: the scalars as they are; what nests (the task, steps, evidence...) as
# JSON text, so that every row group has one schema whatever the episodes hold
PARQUET_SCALARS = {
    "id": "string",
    "status": "string",
    "mode": "string",
    "verdict": "string",
    "reward": "float64",
    "passed": "bool_",
    "reason": "string",
    "error": "string",
    "created_at": "string",
    "finished_at": "string",
    "exit_code": "int64",
    "stdout": "string",
    "stderr": "string",
    "cheat_detected": "bool_",
    "judge": "string",
}
PARQUET_JSON = (
    "metadata",
    "task",
    "solution",
    "steps",
    "tests",
    "cheat_labels",
    "evidence",
    "timings",
    "sandbox",
)


def parquet_ready() -> bool:
    """Whether pyarrow (an optional dependency: `pip install proctor[parquet]`) is here."""
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def parquet_chunks(pages: Iterable[list[dict[str, Any]]]) -> Iterator[bytes]:
    """A Parquet file, one row group per page, handed on as each group is written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [(name, getattr(pa, kind)()) for name, kind in PARQUET_SCALARS.items()]
        + [(name, pa.string()) for name in PARQUET_JSON]
    )
    out = _Chunks()
    with pq.ParquetWriter(out, schema) as writer:
        for page in pages:
            columns = {name: [row.get(name) for row in page] for name in PARQUET_SCALARS}
            for name in PARQUET_JSON:
                columns[name] = [json.dumps(row.get(name), ensure_ascii=False) for row in page]
            writer.write_table(pa.table(columns, schema=schema))
            yield out.take()
    yield out.take()


class _Chunks:
    """A write-only file whose bytes are taken as they come (what ParquetWriter writes to)."""

    closed = False

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._at = 0

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        self._at += len(data)
        return len(data)

    def tell(self) -> int:
        return self._at

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def writable(self) -> bool:
        return True

    def take(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data
