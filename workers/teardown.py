"""What a deployment leaves on a host's Docker engine when its last worker stops: nothing.

Each worker process removes what it holds when it stops (its pools' idle sandboxes, the
containers of the interactive episodes it serves, its spare networks: workers/main.py).
What no single process owns goes with the last one out: the honeypot, the networks made
for it and its sandboxes, and whatever a killed process could not remove. A stopped
`make run` left 171 containers, 114 networks and the honeypot behind. While another
worker of the deployment is alive (another `proctor worker`, a compose replica on the same
engine) the honeypot stays: that worker serves sandboxes on its network.
"""

from __future__ import annotations

import logging

import redis

from core.config import Settings
from core.store import EpisodeStore
from workers.janitor import worker_name
from workers.sandbox.docker import Engine, SandboxError

log = logging.getLogger(__name__)


def honeypot_name(settings: Settings) -> str:
    return f"proctor-honeypot-{settings.deployment_id}"


def leave_engine(settings: Settings) -> None:
    """Remove the deployment's containers and networks from this engine, unless another of
    its workers is still alive (or Redis cannot say: then the next start's sweep does)."""
    client = redis.Redis.from_url(settings.redis_url)
    try:
        live = EpisodeStore(client).live_workers(settings.heartbeat_ttl_s)
    except redis.RedisError as exc:
        log.warning("cannot tell whether other workers are alive (%s): leaving the honeypot", exc)
        return
    finally:
        client.close()
    if live:
        log.info("%d workers of this deployment still alive: the honeypot stays", len(live))
        return
    host, deployment = settings.host_id, settings.deployment_id
    try:
        engine = Engine(worker=worker_name(host), host=host, deployment=deployment)
        removed = engine.remove_deployment(services=[honeypot_name(settings)])
    except SandboxError as exc:
        log.warning("could not remove the deployment's containers: %s", exc)
        return
    log.info("the last worker out removed the honeypot and %d leftover containers", removed)
