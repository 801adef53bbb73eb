"""`proctor submit`'s pure parts: reading the input, what a resumed run skips, and the
loop against a service answering over `httpx.MockTransport` (a full queue, a bad line)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from proctor.cli_episodes import parse_metrics, plain
from proctor.cli_submit import (
    InputError,
    Line,
    Tally,
    finished_ids,
    read_lines,
    result_row,
    run_lines,
    writer,
)
from proctor.client import AsyncClient
from proctor.models import EpisodeResult, EpisodeStatus, Verdict

EPISODE = {"task": {"tests": {"files": {"test_x.py": "def test_x(): pass"}}}, "solution": {}}


def test_lines_keep_their_id_or_are_named_by_their_content() -> None:
    text = json.dumps({"id": "a", **EPISODE}) + "\n\n" + json.dumps(EPISODE) + "\n"
    first, second = read_lines(text)
    assert (first.input_id, first.number, second.number) == ("a", 1, 3)
    assert second.input_id.startswith("sha256:")
    assert read_lines(json.dumps(EPISODE))[0].input_id == second.input_id


@pytest.mark.parametrize(
    ("text", "says"),
    [("{nope", "line 1: not JSON"), ("[1]", "not a JSON object"), ('{"task": {}}', "task.tests")],
)
def test_a_bad_line_is_named(text: str, says: str) -> None:
    with pytest.raises(InputError, match=says):
        read_lines(text)


def test_a_resumed_run_skips_only_completed_ids(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    line = read_lines(json.dumps(EPISODE))[0]
    rows = [
        result_row(
            Line(1, "done", line.request),
            EpisodeResult(id="ep1", status=EpisodeStatus.completed),
            None,
        ),
        result_row(
            Line(2, "infra", line.request),
            EpisodeResult(id="ep2", status=EpisodeStatus.failed),
            None,
        ),
        result_row(Line(3, "refused", line.request), None, "422: bad"),
    ]
    out.write_text("".join(rows) + '{"input_id": "torn", "sta')
    assert finished_ids(out) == {"done"}
    assert finished_ids(tmp_path / "missing.jsonl") == set()


class Service:
    """Answers the batch and get routes: the first batch with 429, a bad image with 422."""

    def __init__(self) -> None:
        self.batches = 0
        self.ids: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/episodes/batch":
            self.batches += 1
            if self.batches == 1:
                return httpx.Response(429, headers={"Retry-After": "0.01"}, json={})
            episodes = json.loads(request.content)["episodes"]
            if any(e["task"]["image"] == "nope" for e in episodes):
                return httpx.Response(422, json={"error": {"message": "unknown image 'nope'"}})
            ids = [f"ep_{len(self.ids) + i}" for i in range(len(episodes))]
            self.ids += ids
            return httpx.Response(202, json={"ids": ids})
        episode_id = request.url.path.rsplit("/", 1)[1]
        return httpx.Response(
            200,
            json={"id": episode_id, "status": "completed", "verdict": "passed", "reward": 1.0},
        )


def test_the_loop_waits_out_a_full_queue_and_isolates_a_bad_line(tmp_path: Path) -> None:
    bad = {**EPISODE, "task": {**EPISODE["task"], "image": "nope"}}
    text = "\n".join(json.dumps({"id": str(i), **(bad if i == 3 else EPISODE)}) for i in range(6))
    lines = read_lines(text)
    service = Service()
    tally = Tally()
    out = tmp_path / "out.jsonl"

    async def go() -> None:
        transport = httpx.MockTransport(service)
        async with AsyncClient("http://proctor", transport=transport) as client:
            with out.open("w") as sink:
                await run_lines(
                    client,
                    lines,
                    writer(sink, tally, lambda: None),
                    concurrency=4,
                    batch=4,
                    timeout_s=5,
                )

    asyncio.run(go())
    rows = [json.loads(r) for r in out.read_text().splitlines()]
    assert sorted(r["input_id"] for r in rows) == [str(i) for i in range(6)]
    refused = [r for r in rows if "status" not in r]
    assert [r["input_id"] for r in refused] == ["3"] and "unknown image" in refused[0]["error"]
    assert tally.verdicts == {Verdict.passed.value: 5} and tally.rejected == 1
    assert finished_ids(out) == {"0", "1", "2", "4", "5"}


def test_metrics_parse_and_untrusted_text_is_plain() -> None:
    text = '# HELP x\nproctor_episodes_total{verdict="passed"} 3.0\nproctor_queue_depth 2\n'
    samples = parse_metrics(text)
    assert samples[("proctor_episodes_total", (("verdict", "passed"),))] == 3.0
    assert samples[("proctor_queue_depth", ())] == 2.0
    shown = plain("[bold]x[/bold]\x1b[2J<script>")
    assert shown.plain == "[bold]x[/bold][2J<script>" and not shown.spans


def test_an_episode_shows_each_evidence_level_and_the_one_that_decided() -> None:
    from rich.console import Console

    from proctor.cli_episodes import render_result
    from proctor.models import (
        CheatCategory,
        CheatReport,
        EpisodeResult,
        EpisodeStatus,
        Evidence,
        EvidenceSource,
        Level,
        Verdict,
    )

    def found(rule: str, level: Level, decisive: bool) -> Evidence:
        return Evidence(
            source=EvidenceSource.rule,
            category=CheatCategory.test_tampering,
            rule=rule,
            detail="seen",
            level=level,
            decisive=decisive,
        )

    result = EpisodeResult(
        id="ep_1",
        status=EpisodeStatus.completed,
        verdict=Verdict.cheat,
        reward=0.0,
        cheat=CheatReport(
            detected=True,
            evidence=[
                found("net.external", Level.attempt, False),
                found("tests.x", Level.cheat, True),
            ],
        ),
    )
    console = Console(record=True, width=200)
    console.print(*render_result(result))
    rows = [line for line in console.export_text().splitlines() if "seen" in line]
    assert len(rows) == 2
    assert "attempt" in rows[0] and "decided" not in rows[0]
    assert "cheat, decided the verdict" in rows[1]
