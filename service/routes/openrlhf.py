"""OpenRLHF's remote reward: `POST /openrlhf/reward` (and `/get_reward`, its server's path).

    --remote_rm_url http://proctor:8000/openrlhf/reward

`{"query", "prompts", "labels"}` in, `{"rewards", "scores", "extra_logs"}` out, one number
per query, always 200 (infrastructure errors are flagged per sample in the body: see
`proctor.integrations.openrlhf`). The answer comes within `deadline_s` (OpenRLHF's client
gives up after 180 s); labels that are task ids are looked up in `PROCTOR_TASKS_FILE`.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from anyio import to_thread
from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from proctor.integrations import openrlhf
from proctor.integrations.codetasks import GroundTruthError, load_catalog
from service.deps import ResourcesDep
from service.errors import error_responses
from service.routes.sandboxfusion import AdapterAuthenticated, run_within

log = logging.getLogger(__name__)

router = APIRouter(tags=["openrlhf"], dependencies=[AdapterAuthenticated])


class CatalogSettings(BaseSettings):
    """Where task ids are defined (read once). Belongs with `core.config` in time."""

    model_config = SettingsConfigDict(env_prefix="PROCTOR_", frozen=True, extra="ignore")

    tasks_file: Path | None = None


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


ADAPTER_ERRORS = error_responses(400, 401, 413, 422, 503)

DeadlineSeconds = Annotated[
    float, Query(gt=0, le=3600, description="answer within this long (OpenRLHF waits 180 s); "
                 "at most the deployment's PROCTOR_MAX_WAIT_S")
]


@lru_cache(maxsize=1)
def task_catalog() -> dict[str, Any] | None:
    """The task catalog, read on first use; None when there is none."""
    path = CatalogSettings().tasks_file
    if path is None:
        return None
    try:
        return load_catalog(path)
    except (OSError, ValueError) as exc:  # a deployment mistake: every id label says so
        log.error("the task catalog %s cannot be read: %s", path, exc)
        return None


async def _reward(request: RewardRequest, resources: ResourcesDep, deadline_s: float) -> Any:
    catalog = await to_thread.run_sync(task_catalog)
    try:
        built = openrlhf.build_episodes(request.query, request.prompts, request.labels,
                                        catalog=catalog)
    except ValueError as exc:  # the lists differ in length: every sample says so, as data
        # errors (OpenRLHF wants one number per query, and the schema cannot say lengths)
        built = [GroundTruthError(f"{exc}: prompts and labels must be as long as query")
                 ] * len(request.query)
    deadline_s = min(deadline_s, resources.settings.max_wait_s)
    samples = await run_within(resources, list(built), deadline_s)
    return openrlhf.reward_body(samples)


@router.post("/openrlhf/reward", operation_id="openrlhf_reward", response_model=RewardResponse,
             responses=ADAPTER_ERRORS)
async def reward(
    request: RewardRequest, resources: ResourcesDep, deadline_s: DeadlineSeconds = 170.0
) -> Any:
    return await _reward(request, resources, deadline_s)


@router.post("/get_reward", operation_id="openrlhf_get_reward", response_model=RewardResponse,
             responses=ADAPTER_ERRORS)
async def get_reward(
    request: RewardRequest, resources: ResourcesDep, deadline_s: DeadlineSeconds = 170.0
) -> Any:
    """The path OpenRLHF's own reward server serves, for configs written against it."""
    return await _reward(request, resources, deadline_s)
