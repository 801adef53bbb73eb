"""Sandboxes nobody else will remove: those of this process's episodes that ended elsewhere
(a cancel, a trainer's deadline, an idle limit), stopped ones whose evidence nobody will
read, and those of workers that are gone. Containers are removed by label."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from core.defaults import MAX_EPISODE_S
from core.store import EpisodeStore
from workers.sandbox.engine import DEPLOYMENT_LABEL, WORKER_LABEL, Engine, SandboxError

log = logging.getLogger(__name__)


class ContainerSweep:
    """The sandboxes a sweep removes."""

    def __init__(
        self,
        store: EpisodeStore,
        engine: Engine,
        *,
        worker: str,
        host: str,
        holding: dict[str, str],
    ) -> None:
        self.store = store
        self.engine = engine
        self.worker = worker
        self.host = host
        self.holding = holding  # see `Janitor`

    def release_ended(self) -> None:
        """Remove the containers of this process's episodes that ended elsewhere (a cancel,
        a trainer's deadline, an idle limit): a running test or agent stops there."""
        for episode_id, container_id in list(self.holding.items()):
            status = self.store.status(episode_id)
            # still held after the read: an episode that ended normally meanwhile let go of
            # its container first, which a pool may have handed to the next episode already
            if (status is None or status.terminal) and self.holding.get(episode_id) == container_id:
                self.engine.remove(container_id)
                self.holding.pop(episode_id, None)
                self.store.release(self.host, episode_id)
                log.info("episode %s: ended; container %s removed", episode_id, container_id[:12])

    def _unclaimed(self, stopped: Mapping[str, Any], live: set[str] | None) -> bool:
        """Whether no episode will ask the engine why this sandbox stopped (the evidence of
        its verdict: its init killed for lack of memory, say). This process's own episodes
        hold theirs; another worker's may (an interactive episode's action or finish runs
        in any worker), so they wait for its janitor, or for it to be known gone (`live`,
        None while workers are not judged); another deployment's, whose workers this one
        does not see, are swept once stopped longer than an episode may run."""
        labels = stopped.get("Labels") or {}
        owner = labels.get(WORKER_LABEL)
        if owner == self.worker:
            return str(stopped["Id"]) not in self.holding.values()
        if labels.get(DEPLOYMENT_LABEL) == self.engine.deployment:
            return live is not None and owner not in live
        since = self.engine.stopped_at(str(stopped["Id"]))
        return since is None or time.time() - since > MAX_EPISODE_S

    def reap(self, live: set[str], *, others: bool = True) -> int:
        """Remove stopped sandboxes, and (`others`) those of workers not in `live`."""
        try:
            containers = self.engine.managed_containers()
        except SandboxError as exc:
            log.warning("janitor: cannot list sandboxes: %s", exc)
            return 0
        # a sandbox that is not running is of no use to anyone, whichever deployment made
        # it (an engine restart stops them all): sweep those too
        try:
            stopped = [
                c
                for c in self.engine.managed_containers(any_deployment=True)
                if c.get("State") not in ("running", "created", "restarting")
            ]
        except SandboxError:
            stopped = []
        removed: set[str] = set()
        for info in stopped:
            if self._unclaimed(info, live if others else None):
                removed.add(str(info["Id"]))
        for info in containers if others else []:
            owner = (info.get("Labels") or {}).get(WORKER_LABEL)
            if owner == self.worker or owner in live or str(info["Id"]) in removed:
                continue
            log.info(
                "janitor: removing container %s of stopped worker %s",
                str(info.get("Id", ""))[:12],
                owner,
            )
            removed.add(str(info["Id"]))
        for container_id in removed:
            self.engine.remove(container_id)
        return len(removed)
