"""The per-process context of a worker: one Redis client, one Docker engine, its pools.

RQ calls job functions with nothing but their arguments; they find these here. The worker
entry point installs the runtime once, before it takes its first job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import redis

from core.config import Settings
from core.limits import within_host
from core.store import EpisodeStore
from proctor.imageref import is_reference
from proctor.models import Isolation, NetworkPolicy, TaskSpec
from workers.guard import Guard
from workers.sandbox.docker import Engine, SandboxError, SandboxSpec
from workers.sandbox.images import TaskImages
from workers.sandbox.pool import WarmPool
from workers.sandbox.pooled import PooledSandbox, RunnerPool
from workers.sandbox.sandbox import Sandbox


@dataclass(slots=True)
class Runtime:
    settings: Settings
    redis: redis.Redis
    store: EpisodeStore
    engine: Engine
    pool: WarmPool
    worker: str
    guard: Guard
    # episodes whose container this process holds (episode id → container id): when one
    # ends elsewhere (cancelled, past a deadline) the janitor removes its container
    holding: dict[str, str] = field(default_factory=dict)
    # episodes this process is running a job for: the janitor tells its own lost ones apart
    busy: set[str] = field(default_factory=set)
    runners: RunnerPool | None = None  # pooled sandboxes, when the deployment's isolation
    # fresh containers whose root server serves one one-shot episode: the container
    # isolation's (none: a one-shot episode's program is a `docker exec` of the runner)
    served: RunnerPool | None = None
    task_images: TaskImages | None = None  # made on the first task image by reference

    def image_for(self, task: TaskSpec, *, pull: bool = True) -> str:
        """The engine's name of the task's image: the deployment's for a name; a reference
        as it is, pulled first where this host does not have it (`TaskImages.ensure`)."""
        if task.image in self.settings.images or not is_reference(task.image):
            return self.settings.images[task.image]
        if pull:
            self.image_cache().ensure(task.image)
        return task.image

    def image_cache(self) -> TaskImages:
        """This process's side of the host's pull cache (made on first use)."""
        if self.task_images is None:
            self.task_images = TaskImages(
                self.engine,
                self.redis,
                host=self.host,
                keep=self.settings.images.values(),
                timeout_s=self.settings.pull_timeout_s,
                budget_gb=self.settings.image_cache_gb,
            )
        return self.task_images

    @property
    def host(self) -> str:
        return self.settings.host_id

    def isolation_for(self, task: TaskSpec) -> Isolation:
        """The deployment's isolation (pooled when it has pooled sandboxes), or the task's
        when it asks for more."""
        if self.runners is None or task.isolation is Isolation.container:
            return Isolation.container
        return Isolation.pooled

    def open_sandbox(self, task: TaskSpec, *, episode_id: str) -> tuple[Sandbox, bool]:
        """A sandbox for a one-shot episode, and whether it was started before it was asked
        for; give it back with `close_sandbox`."""
        if self.runners is not None and self.isolation_for(task) is Isolation.pooled:
            return self.runners.acquire(self.spec_for(task, pooled=True), episode_id=episode_id)
        if self.served is not None:
            return self.served.acquire(self.spec_for(task, server=True), episode_id=episode_id)
        container, warm = self.pool.acquire(self.spec_for(task))
        return Sandbox(self.engine, container, episode_id=episode_id), warm

    def close_sandbox(self, sandbox: Sandbox) -> None:
        if isinstance(sandbox, PooledSandbox):
            pool = self.runners if sandbox.container.spec.pooled else self.served
            assert pool is not None  # it came from there
            pool.release(sandbox)
        else:
            self.pool.discard(sandbox.container)

    def network_for(self, task: TaskSpec) -> tuple[str, tuple[str, ...]]:
        """The network and DNS servers: the honeypot's, unless it is down or not wanted."""
        honeypot = self.guard.honeypot
        policy = task.policy.network
        if policy is NetworkPolicy.none or self.settings.network == "none":
            return "none", ()
        if honeypot is not None and honeypot.address:
            return honeypot.network, (honeypot.address,)
        if policy is NetworkPolicy.honeypot:
            raise SandboxError("the task asks for the honeypot network, which is not up")
        return "none", ()

    def spec_for(
        self, task: TaskSpec, *, pooled: bool = False, server: bool = False, pull: bool = True
    ) -> SandboxSpec:
        """The sandbox for `task` (`pull`: make sure its image is here, a sandbox is to be
        made; without it, for one that runs already)."""
        limits = within_host(task.limits, self.settings)  # the API may run on a larger host
        network, dns = self.network_for(task)
        return SandboxSpec(
            image=self.image_for(task, pull=pull),
            memory_mb=limits.memory_mb,
            cpus=limits.cpus,
            pids=limits.pids,
            disk_mb=limits.disk_mb,
            network=network,
            dns=dns,
            user=self.settings.sandbox_user,
            runtime=self.settings.runtime,
            server=server,
            pooled=pooled,
            cover=task.repo.path if task.repo is not None and not (server or pooled) else None,
        )


_current: Runtime | None = None


def install(runtime: Runtime) -> None:
    global _current
    _current = runtime


def current() -> Runtime:
    if _current is None:
        raise RuntimeError("no worker runtime installed: jobs run inside `proctor worker`")
    return _current
