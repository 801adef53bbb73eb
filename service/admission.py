"""Admission: a request beyond what the deployment's hosts can give is refused (422) before
it is queued, never a Docker error turned `infra_error` or a sandbox that holds a host for
hours. The maxima and the messages are `core.limits`'."""

from __future__ import annotations

from core.config import Settings
from core.limits import HostMaxima, action_refusal, refusals
from proctor.models import Action, EpisodeCreate
from service.errors import BadRequest


def admit(request: EpisodeCreate, settings: Settings) -> None:
    """Refuse (422) a request beyond what this deployment's hosts can give."""
    over = refusals(request, HostMaxima.of(settings))
    if over:
        raise BadRequest("; ".join(over))


def admit_action(action: Action, settings: Settings) -> None:
    """Refuse (422) an interactive action whose timeout is past the episode's maximum."""
    refusal = action_refusal(action, settings)
    if refusal:
        raise BadRequest(refusal)
