"""The wire models of `POST /v1/images/prefetch`: warm every worker host for a dataset's
task images by reference, and read how far it got."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from proctor.imageref import check_reference

MAX_IMAGES = 10_000


class PullState(StrEnum):
    queued = "queued"  # its host has not come to it yet
    pulling = "pulling"
    pulled = "pulled"  # pulled for this prefetch
    present = "present"  # the host had it already
    not_found = "not_found"  # the registry says it does not exist (the dataset's fault)
    failed = "failed"  # the registry or the engine failed (ours: try again later)

    @property
    def done(self) -> bool:
        return self not in (PullState.queued, PullState.pulling)


class PrefetchCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    images: list[str] = Field(
        min_length=1, max_length=MAX_IMAGES, description="image references (repeats are one)"
    )

    @field_validator("images")
    @classmethod
    def _check_images(cls, images: list[str]) -> list[str]:
        return list(dict.fromkeys(check_reference(image) for image in images))


class HostPull(BaseModel):
    host: str
    image: str
    state: PullState
    detail: str = ""


class PrefetchPublic(BaseModel):
    """A prefetch and its progress: `done` of `total` (images by live worker hosts when it
    was asked) have ended, each pull's state in `pulls`."""

    id: str
    images: list[str]
    hosts: list[str]
    total: int
    done: int
    complete: bool
    counts: dict[str, int] = Field(description="pulls by state")
    pulls: list[HostPull]
