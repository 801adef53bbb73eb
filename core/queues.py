"""The queues and the job functions on them, by name: the API enqueues by dotted path, so
it never imports the worker side (and with it Docker)."""

from __future__ import annotations

QUEUE_NAME = "proctor"
RUN_EPISODE = "workers.jobs.run_episode"
RUN_ACTION = "workers.jobs.run_action"
FINISH_EPISODE = "workers.jobs.finish_episode"
PREFETCH_IMAGES = "workers.jobs.prefetch_images"


def host_queue_name(host_id: str) -> str:
    """The queue served only by workers on one host: finishes must reach their container."""
    return f"{QUEUE_NAME}.host.{host_id}"


def host_actions_queue_name(host_id: str) -> str:
    """The host's queue of agent actions, taken before any other job: an action is one
    short exec an agent waits on, and in the host's one queue it waited behind every
    finish (a test run) and start queued before it — a batch's finishes made its actions
    time out (bench/agentic.py). Each episode has at most one action in flight, so this
    queue holds at most one job per open episode and cannot starve the others for long."""
    return f"{QUEUE_NAME}.host.{host_id}.actions"


def served_queues(host_id: str) -> list[str]:
    """The queues a worker on `host_id` serves, in the order it takes their jobs."""
    return [host_actions_queue_name(host_id), host_queue_name(host_id), QUEUE_NAME]
