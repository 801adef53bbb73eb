"""OpenRLHF's remote reward translated to episodes: `{"query", "prompts", "labels"}` in,
`{"rewards", "scores", "extra_logs"}` out, one number per query.

Infrastructure errors are flagged per sample in the body (see `proctor.integrations.openrlhf`);
labels that are task ids are looked up in the catalog `PROCTOR_TASKS_FILE` names. The routes
are `service.routes.openrlhf`.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Any

from anyio import to_thread
from pydantic import BaseModel, ConfigDict, Field

from proctor.integrations import openrlhf
from proctor.integrations.codetasks import GroundTruthError, load_catalog
from proctor.models import EpisodeCreate
from service.adapters.deadline import run_within
from service.deps import Resources
from service.idempotency import body_key, keyed

log = logging.getLogger(__name__)


class RewardRequest(BaseModel):
    # OpenRLHF's payload; anything else a custom client adds is ignored, as its server does
    model_config = ConfigDict(extra="ignore")

    query: list[str] = Field(max_length=10_000, description="prompt and response, decoded")
    prompts: list[str] | None = None
    labels: list[Any] | None = Field(None, description="per query: a task as JSON, or a task id")


class RewardResponse(BaseModel):
    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]]
    proctor: list[dict[str, Any]] = Field(description="per query: episode id, verdict, error")


@lru_cache(maxsize=4)
def task_catalog(path: Path | None) -> dict[str, Any] | None:
    """The task catalog at `path`, read on first use; None when there is none."""
    if path is None:
        return None
    try:
        return load_catalog(path)
    except (OSError, ValueError) as exc:  # a deployment mistake: every id label says so
        log.error("the task catalog %s cannot be read: %s", path, exc)
        return None


async def reward(
    resources: Resources,
    request: RewardRequest,
    deadline_s: float,
    *,
    idempotency_key: str | None = None,
    share_identical: bool = False,
) -> Any:
    """One reward per query, answered within `deadline_s` (and the deployment's max wait).

    OpenRLHF's client retries a failed call with the same body and sends no key: the call's
    key is then its body's digest, so a retry gets the same episodes, while equal queries of
    one call (a group's equal responses) are samples of their own (`<key>/<i>`)."""
    catalog = await to_thread.run_sync(task_catalog, resources.settings.tasks_file)
    try:
        built = openrlhf.build_episodes(
            request.query, request.prompts, request.labels, catalog=catalog
        )
    except ValueError as exc:  # the lists differ in length: every sample says so, as data
        # errors (OpenRLHF wants one number per query, and the schema cannot say lengths)
        built = [GroundTruthError(f"{exc}: prompts and labels must be as long as query")] * len(
            request.query
        )
    if idempotency_key is None and not share_identical:
        idempotency_key = body_key(request.model_dump_json())
    items: list[EpisodeCreate | Exception] = [
        item
        if isinstance(item, Exception)
        else keyed(
            item,
            None if idempotency_key is None else f"{idempotency_key}/{i}",
            share_identical=share_identical,
        )
        for i, item in enumerate(built)
    ]
    deadline_s = min(deadline_s, resources.settings.max_wait_s)
    samples = await run_within(resources, items, deadline_s)
    return openrlhf.reward_body(samples)
