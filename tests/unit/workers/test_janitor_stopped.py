"""Which stopped sandboxes a worker's janitor sweeps: never one an episode of any live worker
may still ask the engine about (why it stopped is the evidence of the episode's verdict)."""

from __future__ import annotations

import time
from typing import Any

from core.defaults import MAX_EPISODE_S
from tests.unit.workers.janitors import janitor_of
from workers.sandbox.engine import DEPLOYMENT_LABEL, WORKER_LABEL


class Engine:
    deployment = "here"

    def __init__(self, containers: list[dict[str, Any]], stopped_s: float = 0.0) -> None:
        self.containers, self.stopped_s = containers, stopped_s
        self.removed: list[str] = []

    def managed_containers(self, *, any_deployment: bool = False) -> list[dict[str, Any]]:
        return [
            c
            for c in self.containers
            if any_deployment or c["Labels"][DEPLOYMENT_LABEL] == self.deployment
        ]

    def stopped_at(self, container_id: str) -> float | None:
        return time.time() - self.stopped_s

    def remove(self, container_id: str) -> None:
        self.removed.append(container_id)


def sandbox(name: str, worker: str, state: str = "exited", deployment: str = "here") -> Any:
    labels = {WORKER_LABEL: worker, DEPLOYMENT_LABEL: deployment}
    return {"Id": name, "State": state, "Labels": labels}


def reaped(engine: Engine, *, holding: dict[str, str], others: bool = True) -> list[str]:
    janitor = janitor_of(None, engine, holding, worker="me")
    assert janitor.containers is not None
    janitor.containers.reap({"me", "peer"}, others=others)
    return sorted(engine.removed)


def test_a_stopped_sandbox_is_swept_by_its_own_worker_unless_an_episode_holds_it() -> None:
    engine = Engine([sandbox("mine", "me"), sandbox("held", "me"), sandbox("up", "me", "running")])
    assert reaped(engine, holding={"ep": "held"}) == ["mine"]


def test_a_live_peers_stopped_sandbox_waits_for_it_a_gone_workers_goes() -> None:
    # an interactive episode's action or finish runs in any worker: the one that made the
    # sandbox holds it, and a peer's janitor must not take its evidence away
    engine = Engine([sandbox("peer's", "peer"), sandbox("gone's", "gone")])
    assert reaped(engine, holding={}) == ["gone's"]
    # while workers are not judged (after a Redis outage) no peer's is touched
    engine = Engine([sandbox("peer's", "peer"), sandbox("gone's", "gone")])
    assert reaped(engine, holding={}, others=False) == []


def test_another_deployments_stopped_sandbox_is_swept_once_no_episode_can_be_waiting() -> None:
    recent = Engine([sandbox("theirs", "w", deployment="there")], stopped_s=60)
    assert reaped(recent, holding={}) == []
    old = Engine([sandbox("theirs", "w", deployment="there")], stopped_s=MAX_EPISODE_S + 60)
    assert reaped(old, holding={}) == ["theirs"]
