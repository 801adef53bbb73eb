"""The TRL reward function called as `GRPOTrainer._calculate_rewards` calls it (trl f2cd577).

TRL awaits an async reward function with `prompts=`, `completions=`, `completion_ids=`, each
dataset column as a keyword (a list per batch), `trainer_state=`, `log_extra=` and
`log_metric=`; a `None` in the answer becomes NaN and leaves that sample's reward out.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from proctor.integrations.trl import completion_text, make_reward_func, proctor_reward
from tests.unit.integrations.conftest import FakeProctor

STDIO = json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]})


class Logs:
    def __init__(self) -> None:
        self.extra: dict[str, list[Any]] = {}
        self.metrics: dict[str, float] = {}

    def log_extra(self, column: str, values: list[Any]) -> None:
        self.extra[column] = values

    def log_metric(self, name: str, value: float) -> None:
        self.metrics[name] = value


def test_the_function_is_a_coroutine_function_as_trl_checks() -> None:
    assert inspect.iscoroutinefunction(proctor_reward)
    assert proctor_reward.__name__ == "proctor_reward"


def test_completions_may_be_text_or_messages() -> None:
    assert completion_text("print(1)") == "print(1)"
    assert completion_text([{"role": "assistant", "content": "x = 1"}]) == "x = 1"
    parts = [{"role": "assistant", "content": [{"type": "text", "text": "y = 2"}]}]
    assert completion_text(parts) == "y = 2"


async def test_a_batch_is_fanned_out_at_once_and_failures_are_none(fake: FakeProctor) -> None:
    reward = make_reward_func("http://proctor", transport=fake.transport, name="code")
    logs = Logs()
    completions = [
        [{"role": "assistant", "content": f"```python\n{text}\n```"}]
        for text in ("RIGHT", "WRONG", "INFRA", "RIGHT")
    ]
    rewards = await reward(
        prompts=[[{"role": "user", "content": "echo"}]] * 4,
        completions=completions,
        completion_ids=[[1, 2]] * 4,
        task=[STDIO, STDIO, STDIO, "{broken"],
        trainer_state=None,
        log_extra=logs.log_extra,
        log_metric=logs.log_metric,
    )
    assert rewards == [1.0, 0.0, None, None]
    # one request creates the batch, one waits for all of it
    assert [p for m, p in fake.requests if m == "POST"] == [
        "/v1/episodes/batch",
        "/v1/episodes/results",
    ]
    assert not [p for m, p in fake.requests if m == "GET"]
    assert logs.extra["proctor_verdict"] == ["passed", "failed", "infra_error", ""]
    assert logs.metrics["proctor/dropped"] == 0.5
    assert reward.__name__ == "code"


async def test_the_task_column_can_be_renamed(fake: FakeProctor) -> None:
    reward = make_reward_func(
        "http://proctor", transport=fake.transport, task_column="verification"
    )
    assert await reward(prompts=["p"], completions=["RIGHT"], verification=[STDIO]) == [1.0]
    with pytest.raises(KeyError, match="verification"):
        await reward(prompts=["p"], completions=["RIGHT"], task=[STDIO])
