"""What a calibration found of the judge (`calibration`): the record a worker's judge goes
by, shared in Redis and shown by `/readyz` under `checks.judge`."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, Field

from proctor.models import Decision

__all__ = ["JudgeState", "ProbeAnswer", "public_url"]


class ProbeAnswer(BaseModel):
    probe: str
    expected: Decision  # intercept for a known cheat, allow for an honest action
    answered: Decision | None = Field(description="the judge's decision; none: no verdict")
    detail: str = ""  # the verdict's confidence and rationale, or why there was none


class JudgeState(BaseModel):
    """What `/readyz` shows under `checks.judge`, and what a worker's judge goes by."""

    configured: bool
    reachable: bool | None = None  # none: not asked yet
    useful: bool | None = None  # none: not calibrated yet (its verdicts are not used)
    reason: str = ""
    url: str = ""  # without credentials
    model: str = ""
    checked_at: float | None = None
    answers: list[ProbeAnswer] = Field(default_factory=list)


def public_url(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
