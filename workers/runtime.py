"""The per-process context of a worker: one Redis client, one Docker engine, one warm pool.

RQ calls job functions with nothing but their arguments; they find these here. The worker
entry point installs the runtime once, before it takes its first job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import redis

from proctor.models import Action, EpisodeResult, NetworkPolicy, Step, TaskSpec
from service.config import Settings
from service.store import EpisodeRecord, EpisodeStore
from workers.sandbox.docker import Engine, SandboxSpec
from workers.sandbox.pool import WarmPool


@dataclass(slots=True)
class Runtime:
    settings: Settings
    redis: redis.Redis
    store: EpisodeStore
    engine: Engine
    pool: WarmPool
    worker: str
    # interactive episodes whose container this process started: episode id → container id
    interactive: dict[str, str] = field(default_factory=dict)

    @property
    def host(self) -> str:
        return self.settings.host_id

    def network_for(self, task: TaskSpec) -> str:
        """`none`, unless the honeypot network is up and the policy allows it."""
        policy = task.policy.network
        if policy is NetworkPolicy.none or self.settings.network == "none":
            return "none"
        if self.honeypot_network_up():
            return self.settings.honeypot_network
        return "none"

    def honeypot_network_up(self) -> bool:
        return False  # the honeypot arrives with the anti-cheat network layer

    def screen_action(self, record: EpisodeRecord, action: Action) -> Step | None:
        """The step to record instead of running the action, when it is intercepted."""
        return None

    def apply_cheat_policy(self, record: EpisodeRecord, result: EpisodeResult) -> EpisodeResult:
        return result

    def spec_for(self, task: TaskSpec) -> SandboxSpec:
        limits = task.limits
        return SandboxSpec(
            image=self.settings.images[task.image],
            memory_mb=limits.memory_mb,
            cpus=limits.cpus,
            pids=limits.pids,
            disk_mb=limits.disk_mb,
            network=self.network_for(task),
            user=self.settings.sandbox_user,
            runtime=self.settings.runtime,
        )


_current: Runtime | None = None


def install(runtime: Runtime) -> None:
    global _current
    _current = runtime


def current() -> Runtime:
    if _current is None:
        raise RuntimeError("no worker runtime installed: jobs run inside `proctor worker`")
    return _current
