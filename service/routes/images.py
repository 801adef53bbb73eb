"""Task images by reference over HTTP: warm every worker host for a dataset's images, and
read how far that got (`service.prefetch`)."""

from __future__ import annotations

from fastapi import APIRouter

from proctor.prefetch import PrefetchCreate, PrefetchPublic
from service import prefetch
from service.deps import Authenticated, ResourcesDep
from service.errors import error_responses

router = APIRouter(prefix="/v1/images", tags=["images"], dependencies=[Authenticated])


@router.post(
    "/prefetch",
    operation_id="prefetch_images",
    status_code=202,
    response_model=PrefetchPublic,
    responses=error_responses(400, 401, 413, 422, 503),
)
async def prefetch_images(body: PrefetchCreate, resources: ResourcesDep) -> PrefetchPublic:
    return await prefetch.start_async(resources, body)


@router.get(
    "/prefetch/{prefetch_id}",
    operation_id="prefetch_progress",
    response_model=PrefetchPublic,
    responses=error_responses(401, 404),
)
async def prefetch_progress(prefetch_id: str, resources: ResourcesDep) -> PrefetchPublic:
    return await prefetch.progress_async(resources, prefetch_id)
