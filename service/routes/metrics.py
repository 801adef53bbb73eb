"""Prometheus metrics (`service.metrics`), the same on every API replica."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from service.deps import ResourcesDep
from service.errors import error_responses
from service.metrics import exposition

router = APIRouter(tags=["health"])


@router.get(
    "/metrics",
    operation_id="metrics",
    response_class=Response,
    responses={
        200: {
            "content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}},
            "description": "Prometheus text exposition",
        },
        **error_responses(503),
    },
)
def metrics(resources: ResourcesDep) -> Response:
    return Response(exposition(resources), media_type=CONTENT_TYPE_LATEST)
