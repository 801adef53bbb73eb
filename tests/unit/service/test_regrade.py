"""What a regrade submits: the same solution (or the interactive actions, replayed) with the
task's tests or today's, linked to the old episode; and when it cannot."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.store import EpisodeRecord
from proctor.models import (
    BashAction,
    EpisodeCreate,
    EpisodeMode,
    EpisodeResult,
    EpisodeStatus,
    Observation,
    Step,
    TestSpec,
)
from service.errors import Conflict
from service.regrade import MAX_REPLAYED_ACTIONS, ArtifactsGone, regrade_request

TASK = {"tests": {"files": {"test_x.py": "def test_x(): pass"}}}
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def record(
    mode: EpisodeMode = EpisodeMode.oneshot,
    status: EpisodeStatus = EpisodeStatus.completed,
    steps: list[Step] | None = None,
    counted: int | None = None,
    metadata: dict[str, str] | None = None,
) -> EpisodeRecord:
    body: dict[str, object] = {"task": TASK, "mode": mode.value, "metadata": metadata or {}}
    if mode is EpisodeMode.oneshot:
        body["solution"] = {"files": {"x.py": "x = 1"}}
    result = EpisodeResult(id="ep_old", status=status, mode=mode, steps=steps or [])
    return EpisodeRecord(
        id="ep_old",
        status=status,
        request=EpisodeCreate.model_validate(body),
        created=0.0,
        result=result if status.terminal else None,
        steps=len(steps or []) if counted is None else counted,
    )


def step(n: int) -> Step:
    return Step(step=n, action=BashAction(command=f"echo {n}"), observation=Observation())


def test_a_one_shot_runs_its_solution_again_linked_to_the_old_one() -> None:
    old = record(metadata={"trainer": "t"})
    new = regrade_request(old, now=NOW)
    assert new.solution == old.request.solution and new.task == old.request.task
    assert new.mode is EpisodeMode.oneshot
    assert new.metadata == {"trainer": "t", "regrade_of": "ep_old", "regraded_at": NOW.isoformat()}


def test_todays_tests_replace_the_tasks() -> None:
    tests = TestSpec(files={"test_y.py": "def test_y(): assert False"})
    assert regrade_request(record(), tests=tests).task.tests == tests


def test_an_interactive_episode_is_replayed_as_its_actions() -> None:
    new = regrade_request(record(EpisodeMode.interactive, steps=[step(1), step(2)]))
    assert new.mode is EpisodeMode.oneshot and new.solution is not None
    assert [a.command for a in new.solution.actions] == ["echo 1", "echo 2"]  # type: ignore[union-attr]


def test_steps_stored_beside_the_record_stand_in_for_a_result_without_them() -> None:
    cancelled = record(EpisodeMode.interactive, status=EpisodeStatus.cancelled, counted=2)
    new = regrade_request(cancelled, stored_steps=[step(1), step(2)])
    assert new.solution is not None and len(new.solution.actions) == 2


def test_gone_steps_too_many_steps_and_running_episodes_are_conflicts() -> None:
    with pytest.raises(ArtifactsGone, match="expired"):
        regrade_request(record(EpisodeMode.interactive, counted=3))
    many = [step(i) for i in range(MAX_REPLAYED_ACTIONS + 1)]
    with pytest.raises(ArtifactsGone, match="at most"):
        regrade_request(record(EpisodeMode.interactive, steps=many))
    with pytest.raises(Conflict, match="has not ended"):
        regrade_request(record(status=EpisodeStatus.running))
    full = {f"k{i}": "v" for i in range(63)}
    with pytest.raises(Conflict, match="no room"):
        regrade_request(record(metadata=full))


def test_the_replay_bound_is_the_solutions() -> None:
    from pydantic import ValidationError

    from proctor.models import Solution

    Solution(actions=[BashAction(command="x")] * MAX_REPLAYED_ACTIONS)
    with pytest.raises(ValidationError):
        Solution(actions=[BashAction(command="x")] * (MAX_REPLAYED_ACTIONS + 1))
