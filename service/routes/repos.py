"""Repositories uploaded once: `POST /v1/repos` (`service.repos`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from proctor.models import RepoCreated
from service import repos
from service.deps import Authenticated, ResourcesDep
from service.errors import error_responses

router = APIRouter(prefix="/v1/repos", tags=["repos"], dependencies=[Authenticated])
PATH = "/v1/repos"


@router.post(
    "",
    operation_id="upload_repo",
    response_model=RepoCreated,
    status_code=201,
    responses=error_responses(401, 413, 422, 503),
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "a tar (plain or gzip) of a work tree with its `.git`, or a git "
            "bundle: the raw bytes, not base64",
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        }
    },
)
async def upload_repo(
    request: Request,
    resources: ResourcesDep,
    base_commit: Annotated[str, Query(description="the commit the agent starts from")],
    branch: Annotated[str, Query(description="the branch the sealed copy is on")] = "main",
) -> RepoCreated:
    """Seal a repository once; episodes name it by the answer's `ref` (`task.repo.ref`)."""
    return await repos.upload(resources, request.stream(), base_commit=base_commit, branch=branch)
