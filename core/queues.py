"""The queues and the job functions on them, by name: the API enqueues by dotted path, so
it never imports the worker side (and with it Docker)."""

from __future__ import annotations

QUEUE_NAME = "proctor"
RUN_EPISODE = "workers.jobs.run_episode"
RUN_ACTION = "workers.jobs.run_action"
FINISH_EPISODE = "workers.jobs.finish_episode"
PREFETCH_IMAGES = "workers.jobs.prefetch_images"


def host_queue_name(host_id: str) -> str:
    """The queue served only by workers on one host: actions must reach their container."""
    return f"{QUEUE_NAME}.host.{host_id}"
