"""The verl adapter called the ways verl calls reward functions and tools.

The call shapes are verl's (b178a3c): the naive manager and the reward loop call
`compute_score(data_source=, solution_str=, ground_truth=, extra_info=)` wrapped by
`partial(_call_with_kwargs, fn, reward_kwargs)`; the prime manager calls positionally in a
process pool and wants a number; the batch manager calls `compute_score(data_sources=,
solution_strs=, ground_truths=, extra_infos=, **reward_kwargs)`; the tool agent loop runs
`create(create_kwargs=...)`, `execute(instance_id, args, agent_data=...)`, `release(id)`
on a tool for every single call.
"""

from __future__ import annotations

import inspect
import json
import pickle
from functools import partial
from types import SimpleNamespace
from typing import Any

import pytest

from proctor.integrations import verl
from tests.unit.integrations.conftest import FakeProctor

STDIO = json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]})


def _call_with_kwargs(raw_fn: Any, extra_kwargs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    return raw_fn(*args, **{**kwargs, **extra_kwargs})  # verl/trainer/ppo/reward.py


async def _call_with_kwargs_async(
    raw_fn: Any, extra_kwargs: dict[str, Any], *args: Any, **kwargs: Any
) -> Any:
    return await raw_fn(*args, **{**kwargs, **extra_kwargs})


def reward_kwargs(fake: FakeProctor) -> dict[str, Any]:
    return {"proctor_url": "http://proctor", "transport": fake.transport, "case_timeout_s": 5}


def completion(code: str) -> str:
    return f"Here is my answer.\n```python\n{code}\n```"


def test_the_naive_manager_call_gets_a_dict_with_the_score(fake: FakeProctor) -> None:
    fn = partial(_call_with_kwargs, verl.compute_score, reward_kwargs(fake))
    row = fn(
        data_source="codecontests",
        solution_str=completion("print('RIGHT')"),
        ground_truth=STDIO,
        extra_info={"index": 7, "num_turns": None},
    )
    assert row["score"] == 1.0
    assert row["acc"] == 1.0
    assert (row["verdict"], row["tests_passed"], row["tests_total"]) == ("passed", 1, 1)
    [episode] = fake.episodes.values()
    assert episode.solution is not None
    assert episode.solution.files == {"solution.py": "print('RIGHT')\n"}
    assert episode.metadata == {"trainer": "verl", "data_source": "codecontests", "index": "7"}
    assert episode.task.limits.timeout_s == 5 + 15


def test_every_sample_returns_the_same_keys_and_types(fake: FakeProctor) -> None:
    rows = verl.compute_score_batch(
        data_sources=["a"] * 5,
        solution_strs=[
            completion("RIGHT"),
            completion("WRONG"),
            completion("INFRA"),
            completion("RIGHT"),
            "anything",
        ],
        ground_truths=[STDIO, STDIO, STDIO, "{not json", verl.TOOL_REWARD],
        extra_infos=[{}, {}, {}, {}, {"tool_rewards": [1.0]}],
        **reward_kwargs(fake),
    )
    assert [r["score"] for r in rows] == [1.0, 0.0, 0.0, 0.0, 1.0]
    assert [r["infra_error"] for r in rows] == [0.0, 0.0, 1.0, 0.0, 0.0]
    assert "docker is down" in rows[2]["error"]
    assert rows[3]["error"].startswith("ground truth:")
    for row in rows:
        assert tuple(row) == verl.RESULT_KEYS
        assert [type(v) for v in row.values()] == [type(v) for v in rows[0].values()]


def test_the_batch_manager_submits_the_batch_in_one_request(fake: FakeProctor) -> None:
    rows = verl.compute_score_batch(
        data_sources=["apps"] * 3,
        solution_strs=[completion("RIGHT")] * 3,
        ground_truths=[STDIO] * 3,
        extra_infos=[{"rollout_reward_scores": {}}] * 3,
        **reward_kwargs(fake),
    )
    assert [r["score"] for r in rows] == [1.0, 1.0, 1.0]
    # one request creates the batch, one waits for all of it
    assert [p for m, p in fake.requests if m == "POST"] == [
        "/v1/episodes/batch",
        "/v1/episodes/results",
    ]
    assert not [p for m, p in fake.requests if m == "GET"]


def test_the_prime_manager_gets_a_number_from_a_positional_call(fake: FakeProctor) -> None:
    fn = partial(_call_with_kwargs, verl.compute_score_float, reward_kwargs(fake))
    # prime: partial(evaluation_func, task, completion, reference, task_extra_info)()
    score = partial(fn, "codecontests", completion("RIGHT"), STDIO, None)()
    assert score == 1.0 and isinstance(score, float)
    # the prime manager runs it in a process pool: it must pickle by reference
    assert pickle.loads(pickle.dumps(verl.compute_score_float)) is verl.compute_score_float


async def test_the_reward_loop_awaits_the_async_variant(fake: FakeProctor) -> None:
    fn = partial(_call_with_kwargs_async, verl.compute_score_async, reward_kwargs(fake))
    assert inspect.iscoroutinefunction(fn)  # how verl decides to await it
    row = await fn(
        data_source="x", solution_str=completion("WRONG"), ground_truth=STDIO, extra_info={}
    )
    assert (row["score"], row["verdict"], tuple(row)) == (0.0, "failed", verl.RESULT_KEYS)


def test_unknown_keyword_arguments_from_verl_are_ignored(fake: FakeProctor) -> None:
    row = verl.compute_score(
        "x",
        completion("RIGHT"),
        STDIO,
        None,
        reward_router_address=None,
        reward_model_tokenizer=None,
        **reward_kwargs(fake),
    )
    assert row["score"] == 1.0


# ------------------------------------------------------------------------ the tool

TASK = {"tests": {"files": {"test_x.py": "def test_x(): pass"}}}


def tool(action: str, fake: FakeProctor) -> Any:
    return verl.ProctorTool(
        {
            "type": "native",
            "action": action,
            "proctor_url": "http://proctor",
            "transport": fake.transport,
        },
        None,
    )


async def call(tool_: Any, parameters: dict[str, Any], trajectory: str) -> tuple[Any, Any, Any]:
    """One tool call the way verl's ToolAgentLoop._call_tool makes it."""
    instance_id, _ = await tool_.create(create_kwargs={"task": TASK})
    try:
        return await tool_.execute(
            instance_id, parameters, agent_data=SimpleNamespace(request_id=trajectory)
        )
    finally:
        await tool_.release(instance_id)


async def test_the_tool_keeps_one_episode_per_trajectory(fake: FakeProctor) -> None:
    bash, submit = tool("bash", fake), tool("submit", fake)
    assert (bash.name, submit.name) == ("bash", "submit")
    assert bash.tool_schema.model_dump()["function"]["parameters"]["required"] == ["command"]
    first, reward, _ = await call(bash, {"command": "ls"}, "traj-1")
    assert first.text == "ran ls\n"
    assert reward is None  # no step reward: verl does not record it
    await call(tool("bash", fake), {"command": "echo RIGHT"}, "traj-1")  # a new instance
    await call(bash, {"command": "echo other"}, "traj-2")
    creates = [p for m, p in fake.requests if (m, p) == ("POST", "/v1/episodes")]
    assert len(creates) == 2  # one per trajectory, not per call or instance
    response, reward, metrics = await call(submit, {}, "traj-1")
    assert (response.text, reward, metrics["verdict"]) == ("Submitted.", 1.0, "passed")
    ended, _, _ = await call(bash, {"command": "ls"}, "traj-1")
    assert ended.text == "The episode has ended."
    # verl hands the tool rewards to the reward function in extra_info
    row = verl.compute_score("x", "", verl.TOOL_REWARD, {"tool_rewards": [reward]})
    assert row["score"] == 1.0


async def test_the_tool_reports_bad_arguments_and_missing_tasks(fake: FakeProctor) -> None:
    bash = tool("bash", fake)
    response, _, _ = await call(bash, {"cmd": "ls"}, "traj-3")
    assert "invalid arguments" in response.text
    instance_id, _ = await bash.create()
    with pytest.raises(ValueError, match="no task"):
        await bash.execute(instance_id, {"command": "ls"})


def test_a_tool_with_an_unknown_action_is_refused(fake: FakeProctor) -> None:
    with pytest.raises(ValueError, match="action"):
        tool("rm", fake)


def test_a_task_the_service_refuses_is_a_wrong_sample_not_an_infra_error(
    fake: FakeProctor,
) -> None:
    # a 4xx refusal (an image or a limit this deployment does not serve) is the data's fault
    fake.refuse_images = {"nope"}
    row = verl.compute_score(
        data_source="a",
        solution_str=completion("RIGHT"),
        ground_truth=STDIO,
        **reward_kwargs(fake),
        image="nope",
    )
    assert (row["score"], row["infra_error"]) == (0.0, 0.0)
    assert row["error"].startswith("refused:")
    assert "unknown image" in row["error"]
