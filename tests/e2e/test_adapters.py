"""The trainer adapters against a running service: verl, OpenRLHF, TRL, and the examples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import httpx
import pytest
import redis

from core.store import EpisodeStore, new_episode_id
from proctor.integrations import verl
from proctor.models import EpisodeCreate, EpisodeStatus, Verdict
from service.deps import Resources
from service.episodes import end_at_deadline
from tests.conftest import REPO_ROOT
from tests.e2e.helpers import episode

ADD = json.dumps({"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]})
ADD_RIGHT = "a, b = map(int, input().split())\nprint(a + b)\n"
PROMPT = "<|im_start|>user\nAdd two integers.<|im_end|>\n<|im_start|>assistant\n"


def fenced(code: str) -> str:
    return f"```python\n{code}```"


def test_verl_scores_a_batch_of_every_format(service_url: str) -> None:
    rows = verl.compute_score_batch(
        data_sources=["codecontests", "leetcode", "mbpp", "broken"],
        solution_strs=[
            fenced(ADD_RIGHT),
            fenced("def double(x):\n    return x * 3\n"),
            fenced("def inc(x):\n    return x + 1\n"),
            fenced("print(1)\n"),
        ],
        ground_truths=[
            ADD,
            json.dumps({"inputs": ["2", "0"], "outputs": ["4", "0"], "fn_name": "double"}),
            {"assert_case": ["assert inc(1) == 2", "assert inc(-1) == 0"]},
            "{not json",
        ],
        extra_infos=[{"index": i} for i in range(4)],
        proctor_url=service_url,
        scoring="partial",
    )
    assert [(r["score"], r["tests_passed"], r["tests_total"]) for r in rows] == [
        (1.0, 2, 2),
        (0.5, 1, 2),
        (1.0, 2, 2),
        (0.0, 0, 0),
    ]
    assert [r["verdict"] for r in rows[:3]] == ["passed", "failed", "passed"]
    assert rows[3]["error"].startswith("ground truth:")
    assert all(r["infra_error"] == 0.0 for r in rows)


async def test_the_verl_tool_runs_a_trajectory_in_one_episode(service_url: str) -> None:
    config = {"type": "native", "proctor_url": service_url}
    bash = verl.ProctorTool({**config, "action": "bash"}, None)
    submit = verl.ProctorTool({**config, "action": "submit"}, None)
    task = {
        "files": {"calc.py": "def add(a, b):\n    return 0\n"},
        "tests": {
            "files": {
                "test_calc.py": "from calc import add\n\n"
                "def test_add():\n    assert add(2, 3) == 5\n"
            }
        },
    }
    trajectory = SimpleNamespace(request_id="e2e-trajectory")

    async def call(tool: object, arguments: dict[str, str]) -> tuple[object, object]:
        instance_id, _ = await tool.create(create_kwargs={"task": task})  # type: ignore[attr-defined]
        try:
            response, reward, _ = await tool.execute(  # type: ignore[attr-defined]
                instance_id, arguments, agent_data=trajectory
            )
        finally:
            await tool.release(instance_id)  # type: ignore[attr-defined]
        return response.text, reward  # type: ignore[attr-defined]

    assert await call(bash, {"command": "cat calc.py"}) == ("def add(a, b):\n    return 0\n", None)
    await call(bash, {"command": "printf 'def add(a, b):\\n    return a + b\\n' > calc.py"})
    assert await call(submit, {}) == ("Submitted.", 1.0)


def test_openrlhf_posts_get_a_reward_for_every_query(http: httpx.Client) -> None:
    payload = {
        "query": [PROMPT + fenced(ADD_RIGHT) + "<|im_end|>", PROMPT + fenced("print(3)\n")],
        "prompts": [PROMPT, PROMPT],
        "labels": [ADD, ADD],
    }
    body = http.post("/openrlhf/reward", json=payload).json()
    assert body["rewards"] == [1.0, 0.0]
    assert body["scores"] == [1.0, 0.0]
    assert body["extra_logs"]["passed"] == [1.0, 0.0]
    assert body["extra_logs"]["infra_error"] == [0.0, 0.0]
    assert [d["verdict"] for d in body["proctor"]] == ["passed", "failed"]
    # the path of OpenRLHF's own reward server; labels that are not tasks still get a number
    response = http.post(
        "/get_reward", json={"query": ["x"], "prompts": [""], "labels": ["no-such-task-id"]}
    )
    assert response.status_code == 200
    body = response.json()
    assert body["rewards"] == [0.0]
    assert "no task catalog" in body["proctor"][0]["error"]


def test_openrlhf_equal_queries_run_apart_and_a_retried_call_runs_once(
    http: httpx.Client,
) -> None:
    query = PROMPT + fenced(ADD_RIGHT + f"# {time.time_ns()}\n") + "<|im_end|>"
    payload = {"query": [query, query], "prompts": [PROMPT, PROMPT], "labels": [ADD, ADD]}
    first = http.post("/openrlhf/reward", json=payload).json()
    ids = [d["episode_id"] for d in first["proctor"]]
    assert first["rewards"] == [1.0, 1.0] and len(set(ids)) == 2  # two samples, two runs
    retry = http.post("/openrlhf/reward", json=payload).json()  # OpenRLHF's retry: same body
    assert [d["episode_id"] for d in retry["proctor"]] == ids


def test_openrlhf_gets_its_answer_before_its_deadline(http: httpx.Client) -> None:
    payload = {"query": [fenced("while True:\n    pass\n")], "prompts": [""], "labels": [ADD]}
    started = time.monotonic()
    response = http.post("/openrlhf/reward", params={"deadline_s": 6}, json=payload)
    elapsed = time.monotonic() - started
    assert response.status_code == 200
    body = response.json()
    assert elapsed < 6 + 1
    assert body["rewards"] == [0.0]
    assert body["extra_logs"]["timeout"] == [1.0]
    assert body["proctor"][0]["verdict"] == "timeout"


@pytest.mark.parametrize(
    ("status", "verdict", "reward"),
    [
        (EpisodeStatus.running, Verdict.timeout, 0.0),  # it ran out of the trainer's time
        (EpisodeStatus.queued, Verdict.infra_error, None),  # it never got a sandbox: our failure
    ],
)
def test_an_episode_past_the_deadline_is_ended_for_good(
    redis_client: redis.Redis, status: EpisodeStatus, verdict: Verdict, reward: float | None
) -> None:
    store = EpisodeStore(redis_client)
    resources = Resources(
        settings=None,
        redis=redis_client,
        aredis=None,
        store=store,  # type: ignore[arg-type]
        queue=None,
        events=None,
        replies=None,
        images=None,
    )  # type: ignore[arg-type]
    episode_id = new_episode_id()
    pipe = redis_client.pipeline()
    store.add(pipe, episode_id, EpisodeCreate.model_validate(episode("print(1)")))
    pipe.execute()
    if status is not EpisodeStatus.queued:
        store.advance(episode_id, status)
    ended = end_at_deadline(resources, episode_id)
    assert (ended.verdict, ended.reward, ended.status.terminal) == (verdict, reward, True)
    record = store.get(episode_id)
    assert record is not None and record.result == ended  # a late worker result is refused
    assert store.status(episode_id) is ended.status  # what the holding worker watches
    assert end_at_deadline(resources, episode_id) == ended


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("verl_reward.py", "batch    [(1.0, 'passed', 2, 2), (1.0, 'passed', 1, 1)]"),
        ("openrlhf_reward_func.py", "HTTP        [1.0] [1.0]"),
        ("openrlhf_agent.py", "reward=1.0 done=True"),
        ("trl_grpo.py", "rewards [1.0, 0.0, 1.0]"),
    ],
)
def test_the_examples_run(service_url: str, script: str, expected: str) -> None:
    run = subprocess.run(
        [sys.executable, str(REPO_ROOT / "examples" / script)],
        env={**os.environ, "PROCTOR_URL": service_url},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert expected in run.stdout, run.stdout
