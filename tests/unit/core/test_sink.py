"""The durable sink: rows as the export's, files rotated by size and day, read back by
the dataset reader; and the store writing exactly one row per terminal result (real Redis)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq  # the server's extra: a missing pyarrow fails, never skips
import pytest
import redis

from core import results
from core.exported import export_line, export_row
from core.sink import EpisodeSink
from core.store import EpisodeStore
from proctor.dataset import RowFilter, read_rows, sink_files
from proctor.models import (
    BashAction,
    CheatCategory,
    CheatReport,
    EpisodeCreate,
    EpisodeExport,
    EpisodeResult,
    EpisodeStatus,
    Evidence,
    EvidenceSource,
    Observation,
    Step,
    Verdict,
)

REQUEST = EpisodeCreate.model_validate(
    {
        "task": {"tests": {"files": {"test_x.py": "def test_x(): pass"}}},
        "solution": {"files": {"x.py": "x = 1"}},
        "metadata": {"trainer": "t1"},
    }
)


def result(episode_id: str = "ep_1", verdict: Verdict = Verdict.cheat) -> EpisodeResult:
    evidence = [
        Evidence(source=EvidenceSource.rule, category=CheatCategory.vcs_history, detail="a"),
        Evidence(source=EvidenceSource.judge, category=CheatCategory.special_casing, detail="b"),
        Evidence(source=EvidenceSource.rule, category=CheatCategory.vcs_history, detail="c"),
    ]
    step = Step(
        step=1,
        action=BashAction(command="git log --all"),
        observation=Observation(output="<script>x</script>"),
        intercepted=True,
        rule="vcs.future-commits",
        category=CheatCategory.vcs_history,
    )
    return EpisodeResult(
        id=episode_id,
        status=EpisodeStatus.completed,
        verdict=verdict,
        reward=0.0,
        passed=False,
        steps=[step],
        cheat=CheatReport(detected=True, evidence=evidence),
        metadata={"trainer": "t1"},
        finished_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    )


def test_a_row_is_an_episode_export_with_its_labels_in_order() -> None:
    row = export_row(REQUEST.model_dump(mode="json"), result().model_dump(mode="json"))
    exported = EpisodeExport.model_validate(row)
    assert exported.cheat_labels == [CheatCategory.vcs_history, CheatCategory.special_casing]
    assert exported.task == REQUEST.task and exported.solution == REQUEST.solution
    assert exported.steps[0].observation.output == "<script>x</script>"
    assert exported.cheat_detected and exported.verdict is Verdict.cheat
    assert exported.metadata == {"trainer": "t1"}


def test_a_row_of_a_sparse_result_still_validates() -> None:
    bare = {"id": "ep_2", "status": "failed", "verdict": "infra_error"}
    row = json.loads(export_line(REQUEST.model_dump_json(), json.dumps(bare)))
    exported = EpisodeExport.model_validate(row)
    assert exported.steps == [] and exported.reason == "" and exported.cheat_labels == []


def write(sink: EpisodeSink, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        sink.write(REQUEST.model_dump_json(), result(f"ep_{i}").model_dump_json())


def test_the_sink_rotates_at_its_size_and_the_reader_gets_every_row(tmp_path: Path) -> None:
    sink = EpisodeSink(tmp_path, writer="host/1", max_bytes=4096)
    write(sink, 20)
    sink.close()
    files = sink_files(tmp_path)
    assert len(files) > 2, files
    assert all(f.stat().st_size <= 4096 or f.read_bytes().count(b"\n") == 1 for f in files)
    assert all("host_1" in f.name for f in files)  # the writer's name, made a file name
    rows = list(read_rows(files, RowFilter()))
    assert [r["id"] for r in rows] == [f"ep_{i}" for i in range(20)]
    assert sink.failures == 0


def test_the_sink_starts_a_file_each_day_and_after_a_restart(tmp_path: Path) -> None:
    days = iter(
        [datetime(2026, 1, 1, 23, 59, tzinfo=UTC)] * 2 + [datetime(2026, 1, 2, tzinfo=UTC)] * 9
    )
    sink = EpisodeSink(tmp_path, writer="w", max_bytes=1 << 20, clock=lambda: next(days))
    write(sink, 3)
    sink.close()
    again = EpisodeSink(tmp_path, writer="w", max_bytes=1 << 20, clock=lambda: next(days))
    write(again, 1, start=3)
    again.close()
    names = [f.name for f in sink_files(tmp_path)]
    assert names == [
        "episodes-2026-01-01-w-00001.jsonl",
        "episodes-2026-01-02-w-00001.jsonl",
        "episodes-2026-01-02-w-00002.jsonl",  # a restarted writer never appends to a torn file
    ]


def test_a_torn_last_line_is_skipped_and_filters_hold(tmp_path: Path) -> None:
    sink = EpisodeSink(tmp_path, writer="w", max_bytes=1 << 20)
    sink.write(REQUEST.model_dump_json(), result("ep_a", Verdict.cheat).model_dump_json())
    sink.write(REQUEST.model_dump_json(), result("ep_b", Verdict.passed).model_dump_json())
    sink.close()
    [path] = sink_files(tmp_path)
    with path.open("ab") as f:
        f.write(b'{"id": "ep_torn", "verd')
    assert [r["id"] for r in read_rows([path], RowFilter())] == ["ep_a", "ep_b"]
    kept = read_rows([path], RowFilter(verdicts=frozenset({"passed"})))
    assert [r["id"] for r in kept] == ["ep_b"]
    late = RowFilter(since=datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC))
    assert list(read_rows([path], late)) == []


def test_a_sink_that_cannot_write_counts_it_and_does_not_raise(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    sink = EpisodeSink(blocker, writer="w", max_bytes=1 << 20)
    write(sink, 1)
    assert sink.failures == 1


@pytest.mark.redis
def test_the_store_writes_one_row_per_terminal_result(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    sink = EpisodeSink(tmp_path, writer="w", max_bytes=1 << 20)
    store = EpisodeStore(redis_client, sink=sink)
    admission = store.create([REQUEST], dedup_keys=[None], max_queued=100, dedup_ttl_s=60)
    record = store.get(admission.ids[0])
    assert record is not None
    ended = results.ended(record, EpisodeStatus.completed, Verdict.passed, reward=1.0, passed=True)
    assert store.finish(ended)
    assert not store.finish(results.cancelled(record))  # it had ended: no second row
    sink.close()
    rows = list(read_rows(sink_files(tmp_path), RowFilter()))
    assert [(r["id"], r["verdict"], r["reward"]) for r in rows] == [(record.id, "passed", 1.0)]
    assert EpisodeExport.model_validate(rows[0]).task == REQUEST.task


def test_rows_read_back_as_parquet_with_one_schema(tmp_path: Path) -> None:

    from proctor.dataset import parquet_chunks

    sink = EpisodeSink(tmp_path, writer="w", max_bytes=1 << 20)
    write(sink, 5)
    sink.close()
    rows = list(read_rows(sink_files(tmp_path), RowFilter()))
    sparse = json.loads(
        export_line(REQUEST.model_dump_json(), '{"id": "ep_x", "status": "failed"}')
    )
    data = b"".join(parquet_chunks([rows[:3], rows[3:], [sparse]]))
    table = pq.read_table(io.BytesIO(data))
    assert table.num_rows == 6
    assert table.column("id").to_pylist() == [f"ep_{i}" for i in range(5)] + ["ep_x"]
    assert json.loads(table.column("cheat_labels")[0].as_py()) == ["vcs_history", "special_casing"]
    assert json.loads(table.column("task")[0].as_py())["tests"]["files"]
