"""Regrading: a finished episode graded again with today's rules, judge and tests.

What is stored of a finished episode is its request (the task and a one-shot solution) and
its result (an interactive episode's steps: each action it took). A regrade submits a new
one-shot episode through the normal path (validation, admission, the queue bound) that runs
the same solution, or replays the interactive actions in order as a one-shot solution, with
the task's tests (or tests given now in their place); the rule filter, the judge and the
grader are whatever the workers run today. The new episode names the old one in its
metadata (`regrade_of`), and carries when it was asked for (`regraded_at`), so two
regrades of one episode never share an episode by dedup.

An interactive replay runs the actions without seeing their observations first: an agent
whose later actions depended on what it saw is graded on what the same actions do now.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from anyio import to_thread

from core.store import EpisodeRecord
from proctor.models import (
    Action,
    EpisodeCreate,
    EpisodeMode,
    EpisodeRegrade,
    Solution,
    Step,
    TestSpec,
)
from service import episodes
from service.deps import Resources
from service.errors import Conflict, NotFound

REGRADE_OF = "regrade_of"
REGRADED_AT = "regraded_at"
MAX_REPLAYED_ACTIONS = 256  # a one-shot solution's bound (`Solution.actions`)
METADATA_PAIRS = 64  # `EpisodeCreate.metadata`'s bound


class ArtifactsGone(Conflict):
    """The episode is stored, but not what grading it again needs."""


def regrade_request(
    record: EpisodeRecord,
    *,
    stored_steps: Sequence[Step] = (),
    tests: TestSpec | None = None,
    now: datetime | None = None,
) -> EpisodeCreate:
    """The one-shot request that grades `record` again (`ArtifactsGone` when it cannot).

    `stored_steps`: an interactive episode's steps as stored beside its record, for when
    its result does not carry them (a cancelled episode's)."""
    if not record.status.terminal:
        raise Conflict(
            f"episode {record.id} has not ended ({record.status.value}): nothing to regrade"
        )
    request = record.request
    metadata = dict(request.metadata)
    metadata[REGRADE_OF] = record.id
    metadata[REGRADED_AT] = (now or datetime.now(UTC)).isoformat()
    if len(metadata) > METADATA_PAIRS:
        raise Conflict(
            f"episode {record.id} has {len(request.metadata)} metadata pairs: no room for "
            f"{REGRADE_OF} and {REGRADED_AT} (at most {METADATA_PAIRS})"
        )
    task = request.task if tests is None else request.task.model_copy(update={"tests": tests})
    if request.mode is EpisodeMode.oneshot:
        solution = request.solution
    else:
        solution = Solution(actions=_replayed_actions(record, stored_steps))
    return EpisodeCreate(task=task, solution=solution, metadata=metadata)


def _replayed_actions(record: EpisodeRecord, stored_steps: Sequence[Step]) -> list[Action]:
    steps = record.result.steps if record.result is not None else []
    if len(stored_steps) > len(steps):
        steps = list(stored_steps)
    if record.steps and len(steps) < record.steps:
        raise ArtifactsGone(
            f"episode {record.id} took {record.steps} actions but {len(steps)} are stored: "
            "its steps expired or were never written, so it cannot be replayed"
        )
    if len(steps) > MAX_REPLAYED_ACTIONS:
        raise ArtifactsGone(
            f"episode {record.id} took {len(steps)} actions; a replay runs at most "
            f"{MAX_REPLAYED_ACTIONS} (a one-shot solution's bound)"
        )
    return [step.action for step in steps]


async def regrade(
    resources: Resources,
    episode_id: str,
    *,
    tests: TestSpec | None = None,
    wait_s: float = 0,
) -> EpisodeRegrade:
    """Submit the regrade of a finished episode; the old result and the new episode (its
    result, if it ends within `wait_s`)."""
    record = await to_thread.run_sync(resources.store.get, episode_id)
    if record is None:
        raise NotFound(f"no episode {episode_id!r} (unknown, or its result expired)")
    stored_steps: list[Step] = []
    if record.request.mode is EpisodeMode.interactive and record.steps:
        stored_steps = await to_thread.run_sync(resources.store.steps, episode_id)
    request = regrade_request(record, stored_steps=stored_steps, tests=tests)
    [new_id] = await episodes.submit(resources, [request])
    new = await episodes.get(resources, new_id, wait_s=wait_s)
    return EpisodeRegrade(old=record.public(), new=new)
