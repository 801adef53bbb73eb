"""The one way an episode's terminal result is built, whoever ends it.

Workers end episodes they graded (`ended`) or could not run (`infra_failure`); the janitor
ends abandoned ones (`infra_failure`, `timed_out`); the API ends cancelled ones
(`cancelled`), given-up ones (`gave_up`) and those a trainer's deadline overtook. Every
result starts from what the record knows (id, mode, metadata, creation time) and carries
when it ended. `reward: null` is only ever our own infrastructure's failure (or a cancel):
`ended` refuses anything else.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from core.store import EpisodeRecord
from proctor.models import EpisodeResult, EpisodeStatus, Step, Verdict

NO_REWARD = frozenset({Verdict.infra_error, Verdict.cancelled})


def ended(
    record: EpisodeRecord,
    status: EpisodeStatus,
    verdict: Verdict,
    *,
    reward: float | None,
    passed: bool | None,
    reason: str = "",
    error: str | None = None,
    **fields: Any,
) -> EpisodeResult:
    """A terminal result of `record`; `fields` are the rest of EpisodeResult's (tests, steps…)."""
    if not status.terminal:
        raise ValueError(f"{status.value} is not a terminal status")
    if (reward is None) != (verdict in NO_REWARD):
        raise ValueError(
            f"a {verdict.value} result must have a reward (null only for "
            f"{', '.join(sorted(NO_REWARD))})"
        )
    return EpisodeResult(
        id=record.id,
        status=status,
        mode=record.request.mode,
        verdict=verdict,
        reward=reward,
        passed=passed,
        reason=reason,
        error=error,
        metadata=record.request.metadata,
        created_at=datetime.fromtimestamp(record.created, UTC),
        finished_at=datetime.now(UTC),
        **fields,
    )


def infra_failure(record: EpisodeRecord, error: str, **fields: Any) -> EpisodeResult:
    """Our infrastructure failed the episode: no reward, so the trainer drops the sample."""
    return ended(
        record,
        EpisodeStatus.failed,
        Verdict.infra_error,
        reward=None,
        passed=None,
        error=error,
        **fields,
    )


def timed_out(record: EpisodeRecord, reason: str, **fields: Any) -> EpisodeResult:
    """The episode ran out of time (idle, open too long, past a trainer's deadline)."""
    return ended(
        record,
        EpisodeStatus.completed,
        Verdict.timeout,
        reward=0.0,
        passed=False,
        reason=reason,
        **fields,
    )


def task_error(record: EpisodeRecord, reason: str, **fields: Any) -> EpisodeResult:
    """The task itself cannot run (its repository is not where or at what it says, or its
    image reference does not exist in its registry: docs/images.md): no agent acted. Not
    our infrastructure's failure, so it has a reward (0); its verdict tells it from an
    agent's failure, for the trainer to drop."""
    return ended(
        record,
        EpisodeStatus.failed,
        Verdict.task_error,
        reward=0.0,
        passed=False,
        reason=reason,
        **fields,
    )


def gave_up(record: EpisodeRecord, reason: str, steps: list[Step]) -> EpisodeResult:
    """The agent ended its episode by `give_up`: the policy's `give_up_reward`, not graded."""
    said = reason.strip().splitlines()[0][:300] if reason.strip() else ""
    return ended(
        record,
        EpisodeStatus.completed,
        Verdict.gave_up,
        reward=record.request.task.policy.give_up_reward,
        passed=False,
        reason="the agent gave up" + (f": {said}" if said else ""),
        steps=steps,
        step_rewards=[s.reward for s in steps],
    )


def cancelled(record: EpisodeRecord) -> EpisodeResult:
    return ended(record, EpisodeStatus.cancelled, Verdict.cancelled, reward=None, passed=None)


def record_gone(episode_id: str) -> EpisodeResult:
    """What is left to say of an episode whose record expired or vanished: our failure."""
    return EpisodeResult(
        id=episode_id,
        status=EpisodeStatus.failed,
        verdict=Verdict.infra_error,
        error="the episode record is gone",
        finished_at=datetime.now(UTC),
    )
