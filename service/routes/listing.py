"""Ended episodes listed over HTTP: `GET /v1/episodes`, newest first (`service.catalog`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query

from core.store import CatalogEntry
from proctor.models import EpisodeListed, EpisodePage
from service.catalog import Catalog, EpisodeFilter
from service.deps import Authenticated, ResourcesDep
from service.errors import error_responses

router = APIRouter(prefix="/v1/episodes", tags=["episodes"], dependencies=[Authenticated])


def listed(entry: CatalogEntry) -> EpisodeListed:
    return EpisodeListed(
        id=entry.id,
        status=entry.status,
        mode=entry.mode,
        verdict=entry.verdict,
        reward=entry.reward,
        passed=entry.passed,
        duration_s=entry.duration_s,
        image=entry.image,
        metadata=dict(entry.metadata),
        created_at=datetime.fromtimestamp(entry.created, UTC) if entry.created else None,
        finished_at=datetime.fromtimestamp(entry.finished, UTC),
        steps=entry.steps,
        reason=entry.reason,
        categories=list(entry.categories),
        rules=list(entry.rules),
    )


@router.get(
    "",
    operation_id="list_episodes",
    response_model=EpisodePage,
    responses=error_responses(401, 422, 503),
)
def list_episodes(
    resources: ResourcesDep,
    verdict: Annotated[str | None, Query(description="one verdict (or none)")] = None,
    mode: Annotated[str | None, Query(description="oneshot or interactive")] = None,
    trainer: Annotated[str | None, Query(description="the metadata pair trainer=…")] = None,
    meta: Annotated[list[str] | None, Query(description="metadata pairs key=value")] = None,
    since: Annotated[
        str | None, Query(description="ended at or after: unix s, ISO 8601, or an age (2h, 7d)")
    ] = None,
    until: Annotated[str | None, Query(description="ended at or before: likewise")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    cursor: Annotated[str | None, Query(description="the `next_cursor` of the last page")] = None,
) -> EpisodePage:
    flt = EpisodeFilter.parse(
        verdict=verdict, mode=mode, trainer=trainer, meta=meta or [], since=since, until=until
    )
    catalog = Catalog(resources.redis, ttl_s=resources.settings.result_ttl_s)
    page = catalog.list(flt, limit=limit, cursor=cursor)
    return EpisodePage(episodes=[listed(e) for e in page.rows], next_cursor=page.next_cursor)
