"""A legitimate way out, over HTTP with a real sandbox: `give_up` ends an interactive episode
as `gave_up` with the policy's `give_up_reward`, graded no further (the hidden tests would
pass), through the API, `proctor.Env` and the verl tool; a one-shot solution cannot carry
it."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from proctor.env import Env
from proctor.integrations import verl

PASSING = {"test_ok.py": "def test_ok():\n    pass\n"}


def _task(**policy: Any) -> dict[str, Any]:
    return {
        "image": "python",
        "tests": {"files": PASSING},
        "limits": {"timeout_s": 30},
        "policy": policy,
    }


@pytest.mark.parametrize("reward", [None, 0.25])
def test_give_up_ends_the_episode_ungraded(http: httpx.Client, reward: float | None) -> None:
    policy = {} if reward is None else {"give_up_reward": reward}
    created = http.post("/v1/episodes", json={"mode": "interactive", "task": _task(**policy)})
    assert created.status_code == 201, created.text
    episode = created.json()["id"]
    step = http.post(f"/v1/episodes/{episode}/actions", json={"type": "bash", "command": "echo hi"})
    assert step.status_code == 200, step.text
    answer = http.post(
        f"/v1/episodes/{episode}/actions",
        json={"type": "give_up", "reason": "the spec contradicts the tests"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["done"] is True
    result = http.get(f"/v1/episodes/{episode}").json()
    assert result["status"] == "completed"
    assert (result["verdict"], result["reward"], result["passed"]) == (
        "gave_up",
        reward or 0.0,
        False,
    )
    assert "the spec contradicts the tests" in result["reason"]
    assert result["tests"] == [] and len(result["steps"]) == 1  # the tests never ran
    after = http.post(f"/v1/episodes/{episode}/actions", json={"type": "bash", "command": "ls"})
    assert after.status_code == 409, after.text
    assert http.post(f"/v1/episodes/{episode}/finish").status_code == 409


def test_a_one_shot_solution_cannot_give_up(http: httpx.Client) -> None:
    body = {"task": _task(), "solution": {"actions": [{"type": "give_up"}]}}
    assert http.post("/v1/episodes", json=body).status_code == 422


def test_env_gives_up(service_url: str) -> None:
    with Env(service_url) as env:
        env.reset(_task(give_up_reward=0.5))
        _, done, info = env.step({"type": "give_up", "reason": "impossible"})
        assert done and info["result"].verdict == "gave_up", info
        assert env.close().reward == 0.5
        env.reset(_task())
        assert env.give_up("again").reward == 0.0


def test_the_verl_tool_gives_up(service_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROCTOR_URL", service_url)
    tool_class = verl.ProctorTool
    bash = tool_class({"action": "bash", "task": _task(give_up_reward=0.125)})
    give_up = tool_class({"action": "give_up"})

    async def trajectory() -> tuple[Any, float | None, dict[str, Any]]:
        instance, _ = await bash.create()
        await bash.execute(instance, {"command": "echo hi"})
        return await give_up.execute(instance, {"reason": "no way"})

    response, reward, metrics = asyncio.run(trajectory())
    assert reward == 0.125 and metrics["verdict"] == "gave_up", (response, metrics)
