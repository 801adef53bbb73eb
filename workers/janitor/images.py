"""The images this worker serves, re-checked every few sweeps: an image removed after start
must turn submissions for it away, not queue them forever (every process of a host asks
the engine about each image: not every sweep)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from core.store import EpisodeStore
from workers.sandbox.engine import Engine

log = logging.getLogger(__name__)


class ImageCheck:
    """What this worker can run now, published for the API (`EpisodeStore.publish_images`)."""

    def __init__(
        self, store: EpisodeStore, engine: Engine, *, worker: str, images: Mapping[str, str]
    ) -> None:
        self.store = store
        self.engine = engine
        self.worker = worker
        self.images = dict(images)  # name → reference

    def publish(self) -> None:
        report = {name: self.engine.image_problem(ref) for name, ref in self.images.items()}
        for name, problem in report.items():
            if problem:
                log.warning("janitor: image %s cannot run here: %s", name, problem)
        self.store.publish_images(self.worker, report)
