"""The OpenRLHF adapter called the ways OpenRLHF calls it (openrlhf/utils/agent.py, 3c3be62).

`SingleTurnAgentExecutor` calls `reward_func([query], [prompt], [label])` positionally (in a
thread) or posts `{"query", "prompts", "labels"}`; it reads `rewards`, `scores` and
`extra_logs` and turns every `extra_logs` value into a tensor. `MultiTurnAgentExecutor`
calls `reset({"observation", "label"})`, then `step({"observation_text", "action_text",
"label", "sampling_params"})` until `done`, reading `rewards.item()`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proctor.integrations import openrlhf
from proctor.integrations.codetasks import CASE_TIME_LIMIT, GroundTruthError
from proctor.models import (
    EpisodeCreate,
    EpisodeResult,
    EpisodeStatus,
    TestCase,
    TestOutcome,
    Verdict,
)
from tests.unit.integrations.conftest import FakeProctor

STDIO = json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]})
PROMPT = "<|im_start|>user\nEcho the input.<|im_end|>\n<|im_start|>assistant\n"


def query(code: str) -> str:
    return f"{PROMPT}Sure:\n```python\n{code}\n```<|im_end|><|endoftext|>"


def test_the_response_is_the_query_without_prompt_and_end_markers() -> None:
    assert openrlhf.response_text(query("x = 1"), PROMPT) == "Sure:\n```python\nx = 1\n```"
    assert openrlhf.response_text("print(1)</s>", "not a prefix") == "print(1)"


def test_labels_become_episodes_or_data_errors(tmp_path: Path) -> None:
    catalog = {"echo": {"inputs": ["1\n"], "outputs": ["1\n"]}}
    built = openrlhf.build_episodes(
        [query("print(input())")] * 3,
        [PROMPT] * 3,
        [STDIO, "echo", "no-such-task"],
        catalog=catalog,
    )
    assert isinstance(built[0], EpisodeCreate) and isinstance(built[1], EpisodeCreate)
    assert built[0].solution is not None
    assert built[0].solution.files == {"solution.py": "print(input())\n"}
    assert built[0].metadata == {"trainer": "openrlhf"}
    assert isinstance(built[2], GroundTruthError)
    with pytest.raises(ValueError, match="3 queries"):
        openrlhf.build_episodes(["a", "b", "c"], ["p"], None)


def test_the_answer_has_a_number_for_every_sample_and_fixed_numeric_logs() -> None:
    passed = EpisodeResult(
        id="a", status=EpisodeStatus.completed, reward=1.0, passed=True, verdict=Verdict.passed
    )
    timed_out = EpisodeResult(
        id="b", status=EpisodeStatus.completed, reward=0.0, passed=False, verdict=Verdict.timeout
    )
    broken = EpisodeResult(
        id="c", status=EpisodeStatus.failed, verdict=Verdict.infra_error, error="docker is down"
    )
    body = openrlhf.reward_body(
        [passed, timed_out, broken, GroundTruthError("bad label"), OSError("unreachable")]
    )
    assert body["rewards"] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert body["scores"] == body["rewards"]
    logs = body["extra_logs"]
    assert tuple(logs) == openrlhf.EXTRA_LOG_KEYS
    assert logs["infra_error"] == [0.0, 0.0, 1.0, 0.0, 1.0]
    assert logs["timeout"] == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert all(isinstance(v, float) for values in logs.values() for v in values)
    assert [d["error"] for d in body["proctor"]][2:] == [
        "docker is down",
        "label: bad label",
        "unreachable",
    ]
    assert json.loads(json.dumps(body)) == body


def test_reward_func_as_openrlhf_calls_it(fake: FakeProctor) -> None:
    # SingleTurnAgentExecutor: asyncio.to_thread(reward_func, [query], [prompt], [label])
    body = openrlhf.reward_func(
        [query("print('RIGHT')")],
        [PROMPT],
        [STDIO],
        proctor_url="http://proctor",
        transport=fake.transport,
    )
    assert (body["rewards"], body["scores"]) == ([1.0], [1.0])
    assert body["extra_logs"]["passed"] == [1.0]
    body = openrlhf.reward_func(
        [query("INFRA"), query("x"), query("WRONG")],
        [PROMPT] * 3,
        [STDIO, "nope", STDIO],
        proctor_url="http://proctor",
        transport=fake.transport,
    )
    assert body["rewards"] == [0.0, 0.0, 0.0]
    assert body["extra_logs"]["infra_error"] == [1.0, 0.0, 0.0]
    assert body["proctor"][1]["error"].startswith("label:")


def test_the_catalog_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"id": "echo", "inputs": ["1"], "outputs": ["1"]}) + "\n")
    monkeypatch.setenv("PROCTOR_TASKS_FILE", str(path))
    openrlhf.task_catalog.cache_clear()
    try:
        assert openrlhf.task_catalog() == {"echo": {"inputs": ["1"], "outputs": ["1"]}}
    finally:
        openrlhf.task_catalog.cache_clear()


# ------------------------------------------------------------------------ the agent

TASK = json.dumps({"tests": {"files": {"test_x.py": "def test_x(): pass"}}})


async def steps(session: openrlhf.ProctorAgentSession, actions: list[str]) -> list[dict[str, Any]]:
    reset = await session.reset({"observation": PROMPT, "label": TASK})
    assert reset == {"observation": PROMPT}
    results = []
    for action in actions:
        result = await session.step(
            {
                "observation_text": PROMPT,
                "action_text": action,
                "label": TASK,
                "sampling_params": "params",
            }
        )
        results.append(result)
        if result["done"]:
            break
    return results


async def test_the_agent_acts_then_submits_for_the_reward(fake: FakeProctor) -> None:
    session = openrlhf.ProctorAgentSession(url="http://proctor", transport=fake.transport)
    results = await steps(session, ["```bash\necho RIGHT\n```", "thinking...", "<submit/>"])
    assert [r["done"] for r in results] == [False, False, True]
    assert [r["rewards"].item() for r in results] == [0.0, 0.0, 1.0]
    assert "ran echo RIGHT" in results[0]["environment_feedback"]
    assert openrlhf.HINT in results[1]["environment_feedback"]
    assert results[2]["environment_feedback"] == ""
    assert all(r["sampling_params"] == "params" for r in results)
    assert all(tuple(r["extra_logs"]) == openrlhf.EXTRA_LOG_KEYS for r in results)
    assert fake.actions == [{"type": "bash", "command": "echo RIGHT\n", "timeout_s": 60.0}]


async def test_the_agent_ends_when_its_step_budget_runs_out(fake: FakeProctor) -> None:
    session = openrlhf.ProctorAgentSession(
        url="http://proctor", transport=fake.transport, max_steps=2
    )
    results = await steps(session, ["```bash\nls\n```"] * 5)
    assert [r["done"] for r in results] == [False, True]
    assert results[-1]["rewards"].item() == 0.0


async def test_the_agent_flags_an_unreachable_service() -> None:
    session = openrlhf.ProctorAgentSession(url="http://127.0.0.1:9")
    [result] = await steps(session, ["```bash\nls\n```"])
    assert result["done"] is True
    assert result["extra_logs"]["infra_error"] == 1.0


def test_a_case_over_its_time_limit_is_a_timeout_though_the_episode_failed() -> None:
    """The harness limits each case: the episode ends `failed`, the loop shows in a case."""
    case = TestCase(
        name="test_proctor_cases.py::test_case[0]",
        outcome=TestOutcome.failed,
        message=f"{CASE_TIME_LIMIT} (10 s)",
    )
    wrong = TestCase(name="test_case[1]", outcome=TestOutcome.failed, message="expected 3, got 4")
    looped, plain = (
        EpisodeResult(
            id=name,
            status=EpisodeStatus.completed,
            reward=0.0,
            passed=False,
            verdict=Verdict.failed,
            tests=tests,
        )
        for name, tests in (("a", [case, wrong]), ("b", [wrong]))
    )
    assert openrlhf.reward_body([looped, plain])["extra_logs"]["timeout"] == [1.0, 0.0]


def test_the_harness_words_a_case_time_limit_as_the_reward_reads_it() -> None:
    harness = Path(openrlhf.__file__).parent / "assets" / "cases_harness.py"
    assert f'return f"{CASE_TIME_LIMIT} (' in harness.read_text()
