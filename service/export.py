"""Finished episodes as a dataset, streamed: `GET /v1/episodes/export`.

The ids come from the catalog of ended episodes (service/catalog.py: newest first, with
its filters), a page at a time; each page's records are read in one round trip (one script
call) and turned into rows (core/exported.py) without validating them again, so an export
holds one page in memory however many episodes it streams. Several verdicts are exported one
after the other. An episode whose record expired between the listing and the read is left
out (it is no longer stored). Rows are JSON Lines, or Parquet when pyarrow is
installed (proctor/dataset.py).

Episodes that Redis no longer holds are in the durable sink's files, if one was on
(`PROCTOR_SINK_DIR`): `proctor export --from-sink DIR` reads those, with the same filters.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import Any

import orjson
import redis

from core import keys
from core.defaults import EXPORT_PAGE
from core.exported import export_row
from core.store import RecordField
from proctor.dataset import parquet_chunks, parquet_ready
from service.catalog import Catalog, EpisodeFilter, InvalidFilter

FORMATS = ("jsonl", "parquet")
MEDIA_TYPES = {"jsonl": "application/x-ndjson", "parquet": "application/vnd.apache.parquet"}


@dataclass(frozen=True, slots=True)
class ExportQuery:
    filters: list[EpisodeFilter]  # one per verdict asked for (one, of every verdict, if none)
    format: str = "jsonl"
    limit: int | None = None


def parse_query(
    *,
    verdicts: Sequence[str] = (),
    mode: str | None = None,
    trainer: str | None = None,
    meta: Sequence[str] = (),
    since: str | None = None,
    until: str | None = None,
    format: str = "jsonl",
    limit: int | None = None,
) -> ExportQuery:
    """The export's filters (the catalog's, with several verdicts allowed), or
    `InvalidFilter` (a 422) saying which one does not parse and why."""
    names = list(dict.fromkeys(v.strip() for item in verdicts for v in item.split(",")))
    names = [n for n in names if n] or [""]
    filters = [
        EpisodeFilter.parse(
            verdict=name, mode=mode, trainer=trainer, meta=meta, since=since, until=until
        )
        for name in names
    ]
    if format not in FORMATS:
        raise InvalidFilter(f"format: {format!r} is not one of {', '.join(FORMATS)}")
    if format == "parquet" and not parquet_ready():
        raise InvalidFilter("format: parquet needs pyarrow, which this server does not have")
    if limit is not None and limit < 1:
        raise InvalidFilter(f"limit: {limit} is not a positive number")
    return ExportQuery(filters=filters, format=format, limit=limit)


# A page's requests and results in one command: one reply to parse instead of a pipeline's
# hundreds (what redis-py spends most of a page's time on). KEYS: the records.
# → request1, result1, request2, … (nil where a record expired)
_READ = f"""
local out = {{}}
for i, key in ipairs(KEYS) do
  local v = redis.call('HMGET', key, '{RecordField.request.value}', '{RecordField.result.value}')
  out[2 * i - 1] = v[1]
  out[2 * i] = v[2]
end
return out
"""


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a page is decoded: the page's rows are hundreds of
    thousands of fresh objects (freed by reference counting, no cycles), and the collections
    they would set off, each walking the whole heap, cost as much as the decoding itself."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def ended_ids(catalog: Catalog, query: ExportQuery, *, page: int) -> Iterator[str]:
    """The ids the query keeps: newest first, verdict by verdict when several are asked."""
    for flt in query.filters:
        yield from catalog.ids(flt, chunk=page)


def rows(
    client: redis.Redis, query: ExportQuery, *, ttl_s: float, page: int = EXPORT_PAGE
) -> Iterator[list[dict[str, Any]]]:
    """The rows of the episodes the query keeps, one list per page of ids."""
    ids = ended_ids(Catalog(client, ttl_s=ttl_s), query, page=page)
    read = client.register_script(_READ)
    left = query.limit
    while left is None or left > 0:
        batch = list(islice(ids, page if left is None else min(page, left)))
        if not batch:
            return
        fields = read([keys.episode(i) for i in batch])
        with _collector_paused():
            out = [
                export_row(orjson.loads(request), orjson.loads(result))
                for request, result in zip(fields[0::2], fields[1::2], strict=True)
                if request is not None and result is not None  # else: expired since listed
            ]
        if left is not None:
            left -= len(batch)
        if out:
            yield out


def stream(
    client: redis.Redis, query: ExportQuery, *, ttl_s: float, page: int = EXPORT_PAGE
) -> Iterator[bytes]:
    """The export's body, a page at a time."""
    pages = rows(client, query, ttl_s=ttl_s, page=page)
    if query.format == "parquet":
        return parquet_chunks(pages)
    return (b"".join(orjson.dumps(row) + b"\n" for row in page) for page in pages)
