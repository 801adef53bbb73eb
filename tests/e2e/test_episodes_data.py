"""Episodes as data, over HTTP against a real service (Redis, Docker, workers): a file of
episodes submitted with `proctor submit` and resumed, the export streamed and filtered,
regrades answering old beside new, and the durable sink written, rotated and read back."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from proctor.dataset import sink_files
from tests.conftest import REPO_ROOT, claimed_database, running_service
from tests.e2e.helpers import episode

pytestmark = [pytest.mark.docker, pytest.mark.redis]

ADD = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"
FAILING_TESTS = "from solution import add\n\n\ndef test_never():\n    assert add(1, 1) == 3\n"


@pytest.fixture(scope="module")
def sink_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sink")


@pytest.fixture(scope="module")
def url(
    docker_ready: None, sink_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    log = tmp_path_factory.mktemp("service") / "service.log"
    # a Redis database of its own (the session's service would run these episodes, without
    # the sink); a sink file holds one or two of these rows before it rotates
    with (
        claimed_database() as redis_url,
        running_service(
            redis_url, log, PROCTOR_SINK_DIR=str(sink_dir), PROCTOR_SINK_MAX_BYTES="4096"
        ) as service,
    ):
        yield service


def proctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proctor.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )


@pytest.fixture(scope="module")
def submitted(url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """`proctor submit` of three episodes (a pass, a fail, a pass without an id): their
    results by input id."""
    work = tmp_path_factory.mktemp("submit")
    source = work / "episodes.jsonl"
    lines = [
        {"id": "add-ok", **episode(ADD)},
        {"id": "add-wrong", **episode(WRONG)},
        episode(ADD + "\n# unnamed\n"),
    ]
    source.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = work / "results.jsonl"
    ran = proctor("submit", str(source), "-o", str(out), "--url", url)
    assert ran.returncode == 0, ran.stderr
    assert "3 ran" in ran.stderr and "episodes by verdict" in ran.stderr
    rows = [json.loads(r) for r in out.read_text().splitlines()]
    again = proctor("submit", str(source), "-o", str(out), "--url", url)
    assert again.returncode == 0, again.stderr
    assert "0 ran" in again.stderr and "3 skipped" in again.stderr
    assert len(out.read_text().splitlines()) == 3  # nothing ran twice
    return {r["input_id"]: r for r in rows}


def test_submit_writes_each_result_with_its_input_id(submitted: dict[str, Any]) -> None:
    assert submitted["add-ok"]["verdict"] == "passed"
    assert submitted["add-wrong"]["verdict"] == "failed"
    [unnamed] = [k for k in submitted if k.startswith("sha256:")]
    assert submitted[unnamed]["reward"] == 1.0


def export(url: str, **params: Any) -> list[dict[str, Any]]:
    with httpx.Client(base_url=url, timeout=60) as http:
        response = http.get("/v1/episodes/export", params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines()]


def test_export_streams_finished_episodes_with_their_task_and_filters(
    url: str, submitted: dict[str, Any]
) -> None:
    rows = {r["id"]: r for r in export(url)}
    ok = rows[submitted["add-ok"]["id"]]
    assert ok["solution"]["files"]["solution.py"] == ADD
    assert ok["task"]["tests"]["files"]["test_solution.py"]
    assert ok["verdict"] == "passed" and ok["cheat_labels"] == []
    assert [t["outcome"] for t in ok["tests"]] == ["passed", "passed"]
    failed = {r["id"] for r in export(url, verdict="failed")}
    assert submitted["add-wrong"]["id"] in failed and ok["id"] not in failed
    assert export(url, since="4102444800") == []  # ended after 2100: none
    assert len(export(url, limit=1)) == 1


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"verdict": "great"}, "verdict"),
        ({"since": "soonish"}, "since"),
        ({"format": "csv"}, "format"),
    ],
)
def test_export_filters_that_do_not_parse_are_422_with_the_reason(
    url: str, params: dict[str, str], says: str
) -> None:
    response = httpx.get(f"{url}/v1/episodes/export", params=params, timeout=30)
    assert response.status_code == 422, response.text
    assert says in response.json()["error"]["message"]


def test_regrade_answers_the_old_result_beside_the_new(url: str, submitted: dict[str, Any]) -> None:
    old_id = submitted["add-ok"]["id"]
    with httpx.Client(base_url=url, timeout=200) as http:
        same = http.post(f"/v1/episodes/{old_id}/regrade", params={"wait": 120})
        assert same.status_code == 200, same.text
        body = same.json()
        assert body["old"]["id"] == old_id and body["old"]["verdict"] == "passed"
        assert body["new"]["id"] != old_id and body["new"]["verdict"] == "passed"
        assert body["new"]["metadata"]["regrade_of"] == old_id
        stricter = http.post(
            f"/v1/episodes/{old_id}/regrade",
            params={"wait": 120},
            json={"tests": {"files": {"test_solution.py": FAILING_TESTS}}},
        )
        assert stricter.status_code == 200, stricter.text
        assert stricter.json()["new"]["verdict"] == "failed"
        assert http.post("/v1/episodes/ep_unknown/regrade").status_code == 404


def test_the_sink_holds_every_episode_the_workers_ended_rotated(
    url: str, submitted: dict[str, Any], sink_dir: Path, tmp_path: Path
) -> None:
    files = sink_files(sink_dir)
    assert len(files) > 1, files  # rotated at PROCTOR_SINK_MAX_BYTES
    ids = {json.loads(line)["id"] for f in files for line in f.read_text().splitlines()}
    assert {r["id"] for r in submitted.values()} <= ids
    out = tmp_path / "failed.jsonl"
    ran = proctor("export", "--from-sink", str(sink_dir), "--verdict", "failed", "-o", str(out))
    assert ran.returncode == 0, ran.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert submitted["add-wrong"]["id"] in {r["id"] for r in rows}
    assert {r["verdict"] for r in rows} == {"failed"}


def test_episodes_and_show_print_what_is_stored(url: str, submitted: dict[str, Any]) -> None:
    listed = proctor("episodes", "--json", "--verdict", "passed", "--url", url)
    assert listed.returncode == 0, listed.stderr
    ids = {json.loads(line)["id"] for line in listed.stdout.splitlines()}
    assert submitted["add-ok"]["id"] in ids and submitted["add-wrong"]["id"] not in ids
    shown = proctor("show", submitted["add-wrong"]["id"], "--url", url)
    assert shown.returncode == 0, shown.stderr
    assert "failed" in shown.stdout and "test_small" in shown.stdout
    top = proctor("top", "--iterations", "1", "--interval", "0.2", "--url", url)
    assert top.returncode == 0, top.stderr
    assert "passed" in top.stdout and "queue" in top.stdout
    assert proctor("show", "ep_unknown", "--url", url).returncode == 2
