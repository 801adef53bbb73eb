"""A prefetch on one host: pull each image it names that the host does not have, through
the host's pull cache (one pull per image however many workers ask), writing the progress
as it goes."""

from __future__ import annotations

import logging

from core import prefetch
from proctor.prefetch import PullState
from workers.runtime import Runtime
from workers.sandbox.docker import ImageNotInRegistry, SandboxError

log = logging.getLogger(__name__)


def prefetch_on_host(rt: Runtime, prefetch_id: str) -> None:
    images = rt.image_cache()
    for image in prefetch.images_of(rt.redis, prefetch_id):

        def note(state: PullState, detail: str = "", image: str = image) -> None:
            prefetch.record(
                rt.redis, prefetch_id, host=rt.host, image=image, state=state, detail=detail
            )

        note(PullState.pulling)
        try:
            pulled = images.ensure(image)
        except ImageNotInRegistry as exc:
            note(PullState.not_found, str(exc))
        except SandboxError as exc:
            log.warning("prefetch %s: %s", prefetch_id, exc)
            note(PullState.failed, str(exc))
        else:
            note(PullState.pulled if pulled else PullState.present)
