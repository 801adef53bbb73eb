"""Finished episodes as a dataset over HTTP: `GET /v1/episodes/export` (`service.export`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from service import export
from service.deps import Authenticated, ResourcesDep
from service.errors import error_responses

router = APIRouter(prefix="/v1/episodes", tags=["episodes"], dependencies=[Authenticated])


@router.get(
    "/export",
    operation_id="export_episodes",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "the finished episodes, newest first: one `EpisodeExport` per line "
            "(JSON Lines), or a Parquet file whose nested fields are JSON text",
            "content": {
                "application/x-ndjson": {"schema": {"type": "string"}},
                "application/vnd.apache.parquet": {
                    "schema": {"type": "string", "format": "binary"}
                },
            },
        },
        **error_responses(401, 422, 503),
    },
)
def export_episodes(
    resources: ResourcesDep,
    verdict: Annotated[
        list[str] | None,
        Query(description="keep these verdicts (repeat it, or separate with commas); all if none"),
    ] = None,
    mode: Annotated[str | None, Query(description="oneshot or interactive")] = None,
    trainer: Annotated[str | None, Query(description="the metadata pair trainer=…")] = None,
    meta: Annotated[list[str] | None, Query(description="metadata pairs key=value")] = None,
    since: Annotated[
        str | None, Query(description="ended at or after: unix s, ISO 8601, or an age (2h, 7d)")
    ] = None,
    until: Annotated[str | None, Query(description="ended at or before: likewise")] = None,
    format: Annotated[str, Query(description="jsonl, or parquet where pyarrow is installed")] = (
        "jsonl"
    ),
    limit: Annotated[int | None, Query(ge=1, description="at most this many episodes")] = None,
) -> StreamingResponse:
    query = export.parse_query(
        verdicts=verdict or [],
        mode=mode,
        trainer=trainer,
        meta=meta or [],
        since=since,
        until=until,
        format=format,
        limit=limit,
    )
    body = export.stream(resources.redis, query, ttl_s=resources.settings.result_ttl_s)
    return StreamingResponse(body, media_type=export.MEDIA_TYPES[query.format])
