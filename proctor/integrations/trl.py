"""TRL: an async reward function for `GRPOTrainer(reward_funcs=...)`.

    from proctor.integrations.trl import proctor_reward
    trainer = GRPOTrainer(model=..., reward_funcs=[proctor_reward], train_dataset=dataset)

TRL awaits each async reward function once per batch, gathering across functions, not
samples; so this one submits the whole batch itself and waits for the results together.
The dataset's `task` column (name it with `make_reward_func(task_column=...)`) holds each
row's ground truth in any format `codetasks` reads. A sample whose episode failed in our
infrastructure, or whose task is malformed, gets `None`: TRL leaves it out of the reward
instead of learning from noise.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import httpx

from proctor.client import AsyncClient
from proctor.integrations import _env
from proctor.integrations.codetasks import (
    CodeTaskOptions,
    GroundTruthError,
    episode_for,
    extract_code,
    run_episodes_async,
)
from proctor.models import EpisodeCreate, EpisodeResult, Verdict

__all__ = ["RewardFunc", "completion_text", "make_reward_func", "proctor_reward"]

log = logging.getLogger(__name__)

RewardFunc = Callable[..., Awaitable[list[float | None]]]
DEFAULT_TIMEOUT_S = 600.0


def completion_text(completion: Any) -> str:
    """A completion as text: TRL passes a string, or (conversational data) a list of messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion:
        content = completion[-1].get("content", "") if isinstance(completion[-1], dict) else ""
        if isinstance(content, list):  # content parts
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return str(content)
    return ""


def make_reward_func(
    url: str | None = None,
    *,
    token: str | None = None,
    task_column: str = "task",
    options: CodeTaskOptions | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    name: str = "proctor_reward",
    transport: httpx.AsyncBaseTransport | None = None,
) -> RewardFunc:
    """A reward function bound to one Proctor service; `url`/`token` default to
    `PROCTOR_URL`/`PROCTOR_TOKEN`, read when it is called."""

    async def reward(
        prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        if task_column not in kwargs:
            raise KeyError(
                f"the dataset has no {task_column!r} column; name the column that holds each "
                f"row's task with make_reward_func(task_column=...)"
            )
        tasks = kwargs[task_column]
        rewards: list[float | None] = [None] * len(completions)
        pending: list[tuple[int, EpisodeCreate]] = []
        for i, (completion, task) in enumerate(zip(completions, tasks, strict=True)):
            try:
                code = extract_code(completion_text(completion))
                pending.append((i, episode_for(task, code, options, metadata={"trainer": "trl"})))
            except GroundTruthError as exc:
                log.warning("TRL reward: sample %d has a malformed task: %s", i, exc)
        verdicts = [""] * len(completions)
        if pending:
            service = _env.service(url, token)
            async with AsyncClient(service.url, token=service.token, transport=transport) as client:
                outcomes = await run_episodes_async(
                    client, [e for _, e in pending], timeout_s=timeout_s
                )
            for (i, _), outcome in zip(pending, outcomes, strict=True):
                if isinstance(outcome, EpisodeResult):
                    rewards[i] = outcome.reward  # None when our infrastructure failed
                    verdicts[i] = str(outcome.verdict or "")
                else:
                    log.warning("TRL reward: sample %d: %s", i, outcome)
                    verdicts[i] = Verdict.infra_error.value
        _log(kwargs, rewards, verdicts)
        return rewards

    reward.__name__ = reward.__qualname__ = name  # TRL logs each function under its name
    return reward


def _log(kwargs: dict[str, Any], rewards: list[float | None], verdicts: list[str]) -> None:
    # TRL asks every process to log the same keys, so these are logged on every call
    log_extra = kwargs.get("log_extra")
    if callable(log_extra):
        log_extra("proctor_verdict", verdicts)
    log_metric = kwargs.get("log_metric")
    if callable(log_metric) and rewards:
        log_metric("proctor/dropped", sum(r is None for r in rewards) / len(rewards))


proctor_reward = make_reward_func()
