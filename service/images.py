"""Refusing a task whose image cannot run: a name no live worker can run (503: queued, it
would wait forever), a reference the deployment does not allow or its registry said it
does not have (422: the request's fault).

The image is in this deployment's allowlist, so this is our failure, not the caller's: the
503 has a Retry-After and names the image and why each worker cannot run it.

Every submit asks, so a yes is kept a second: the workers report their images at their
heartbeats, seconds apart, and the answer cannot be much fresher than that anyway. A no,
or no live worker at all (they may be starting; `/readyz` says so), is asked afresh.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from core.config import Settings
from core.defaults import IMAGE_RETRY_AFTER_S
from core.store import EpisodeStore
from core.task_images import missing_reason
from proctor.imageref import allowed
from proctor.models import EpisodeCreate
from service.errors import BadRequest, ImageNotFound, ServiceUnavailable

HOLD_S = 1.0  # how long a yes is kept


class ImageCheck:
    def __init__(self, settings: Settings, store: EpisodeStore) -> None:
        self.settings = settings
        self.store = store
        self._runnable_until: dict[str, float] = {}  # image name → monotonic time

    def check(self, requests: Sequence[EpisodeCreate]) -> None:
        """Refuse (503) the requests if any asks for an image no live worker can run."""
        now = time.monotonic()
        # references: every worker pulls them (`check_reference` judged them)
        asked = {r.task.image for r in requests if r.task.image in self.settings.images}
        names = sorted(asked - self._known_runnable(now))
        if not names:
            return
        unrunnable = self.store.unrunnable_images(names, ttl_s=self.settings.heartbeat_ttl_s)
        if unrunnable is None:  # no live worker: nothing is known
            return
        if unrunnable:
            name, why = min(unrunnable.items())
            raise ServiceUnavailable(
                f"no live worker can run image {name!r} "
                f"({self.settings.images.get(name, name)}): {why[:1000]}",
                headers={"Retry-After": str(IMAGE_RETRY_AFTER_S)},
            )
        self._runnable_until.update(dict.fromkeys(names, now + HOLD_S))

    def _known_runnable(self, now: float) -> set[str]:
        return {name for name, until in self._runnable_until.items() if until > now}


def check_allowed(settings: Settings, image: str) -> None:
    """Refuse (422) a reference outside the deployment's patterns."""
    patterns = settings.image_allow
    if not allowed(image, patterns):
        offered = ", ".join(patterns) if patterns else "none (PROCTOR_IMAGE_ALLOW is empty)"
        raise BadRequest(
            f"image reference {image!r} is not allowed here; allowed patterns: {offered}"
        )


def check_reference(settings: Settings, store: EpisodeStore, image: str) -> None:
    """Refuse (422) a reference outside the deployment's patterns, or one whose registry
    told a worker lately that it does not exist (`core.task_images`)."""
    check_allowed(settings, image)
    why = missing_reason(store.redis, image)
    if why is not None:
        raise ImageNotFound(f"image {image!r} does not exist: {why[:1000]}")
