"""Sandbox containers: made locked down with `create` + `start` (never `run`, which
silently pulls), removed with force together with what they joined, and read (state,
resource use, OOM kills)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from contextlib import suppress
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, NotFound

from workers.sandbox import untrusted
from workers.sandbox.engine.base import engine_time
from workers.sandbox.engine.constants import (
    DEPLOYMENT_LABEL,
    HOLDER_LABEL,
    HOST_LABEL,
    MANAGED_LABEL,
    MEMORY_CGROUPS,
    OWN_MOUNTS,
    POOLED_CAPS,
    POOLED_SERVER_MB,
    READ_ONLY_PATHS,
    SANDBOX_HOME,
    STATS_TRIES,
    WORKER_LABEL,
    WORKSPACE,
)
from workers.sandbox.engine.errors import NetworkGone, SandboxError, wrap
from workers.sandbox.engine.holders import Holders
from workers.sandbox.engine.images import Images
from workers.sandbox.engine.specs import Container, SandboxSpec, Usage

log = logging.getLogger(__name__)


class Containers(Holders, Images):
    """Sandbox containers: made, removed, inspected."""

    def create(
        self,
        spec: SandboxSpec,
        *,
        name: str,
        labels: dict[str, str] | None = None,
        main: list[str] | None = None,
    ) -> Container:
        """Create and start a locked-down sandbox container. Its main process is an idle
        keeper, or `main` (a server's: root, its stdin kept open for `attach_main`)."""
        try:
            return self._create(spec, name=name, labels=labels, main=main, reuse=True)
        except NetworkGone:  # a spare network another worker pruned meanwhile: make one
            return self._create(spec, name=name, labels=labels, main=main, reuse=False)

    def _create(
        self,
        spec: SandboxSpec,
        *,
        name: str,
        labels: dict[str, str] | None,
        main: list[str] | None,
        reuse: bool,
    ) -> Container:
        started = time.monotonic()
        # a served sandbox's directories are root's until its server hands them to an episode
        uid, _, gid = ("0:0" if spec.served else spec.user).partition(":")
        memory_mb = spec.memory_mb + (POOLED_SERVER_MB if spec.served else 0)
        # exec: agents run scripts and compiled programs from their workspace
        tmpfs_opts = f"rw,exec,nosuid,nodev,size={spec.disk_mb}m"
        mounted = (*OWN_MOUNTS, spec.cover) if spec.cover else OWN_MOUNTS
        image = untrusted.overrides(self._image_config(spec.image), ours=mounted)
        holder, own_network, reused = None, "", False
        if self._joins_holder(spec):
            holder, reused = self._take_holder(spec, name, reuse=reuse)
            network, dns = f"container:{holder.id}", None
        else:
            network, dns, own_network, reused = self._sandbox_network(spec, name, reuse=reuse)
        host_config = self.api.create_host_config(
            network_mode=network,
            dns=dns,
            read_only=True,
            cap_drop=["ALL"],
            cap_add=list(POOLED_CAPS) if spec.served else None,
            security_opt=["no-new-privileges"],
            mem_limit=f"{memory_mb}m",
            memswap_limit=f"{memory_mb}m",  # equal: no swap
            nano_cpus=int(spec.cpus * 1e9),
            pids_limit=spec.pids,
            # an init that reaps zombies, so they never eat the pids limit; a server is its
            # own (it reaps what its episodes leave), and one process fewer to start
            init=main is None,
            runtime=spec.runtime,
            oom_score_adj=500,  # under host memory pressure, sandboxes go first
            tmpfs={
                WORKSPACE: f"{tmpfs_opts},uid={uid},gid={gid or uid},mode=0755",
                SANDBOX_HOME: f"{tmpfs_opts},uid={uid},gid={gid or uid},mode=0755",
                "/tmp": f"{tmpfs_opts},mode=1777",
                # SandboxFusion's image has a world-writable /mnt its tests write to
                "/mnt": f"{tmpfs_opts},mode=1777",
                **(
                    {spec.cover: f"rw,nosuid,nodev,size=16m,uid={uid},gid={gid or uid},mode=0755"}
                    if spec.cover
                    else {}
                ),
                **image.tmpfs,
            },
            ulimits=[docker.types.Ulimit(name="nofile", soft=1024, hard=1024)],
            log_config=docker.types.LogConfig(type="none"),
        )
        host_config["ReadonlyPaths"] = list(READ_ONLY_PATHS)  # docker-py has no argument
        all_labels = {
            MANAGED_LABEL: "1",
            WORKER_LABEL: self.worker,
            HOST_LABEL: self.host,
            DEPLOYMENT_LABEL: self.deployment,
            **(labels or {}),
        }
        argv = main or ["sleep", "infinity"]
        try:
            created = self.api.create_container(
                spec.image,
                # the entrypoint, not the command: an image's own entrypoint never runs
                entrypoint=argv[:1],
                command=argv[1:],
                healthcheck=untrusted.NO_HEALTHCHECK,
                # The idle keeper runs as root without capabilities, so the sandbox user
                # (who runs every exec) cannot kill it and take the container down with
                # `kill -1`; nothing of the code under test ever runs as root.
                user="0:0",
                stdin_open=main is not None,
                name=name,
                hostname=None if holder else "sandbox",  # a holder's: it has the holder's
                working_dir=WORKSPACE,
                labels={**image.labels, **all_labels},
                environment={
                    **image.environment,
                    "HOME": SANDBOX_HOME,
                    "LANG": "C.UTF-8",
                    "PYTHONDONTWRITEBYTECODE": "1",
                    "PYTHONUNBUFFERED": "1",
                },
                host_config=host_config,
                network_disabled=spec.network == "none" and holder is None,
            )
        except (DockerException, requests.exceptions.RequestException) as exc:
            if holder:
                self._remove_holder(holder)
            if own_network:
                self._forget_network(own_network)
                self._remove_sandbox_network(own_network)
            if reused and isinstance(exc, NotFound):  # the spare went meanwhile
                raise NetworkGone(holder.name if holder else own_network) from exc
            raise wrap(exc, f"create sandbox from {spec.image}") from exc
        container_id = str(created["Id"])
        with self._lock:
            if holder:
                self._holder_of[container_id] = holder
            if own_network:
                self._own_networks[container_id] = own_network
        try:
            self.api.start(container_id)
        except (DockerException, requests.exceptions.RequestException) as exc:
            if holder:  # it goes with this sandbox, which may have failed because of it
                self._forget_holder(container_id)
                self._remove_container(container_id)
                self._remove_holder(holder)
                if reused and isinstance(exc, APIError):  # a spare holder gone or stopped
                    raise NetworkGone(holder.name) from exc
                raise wrap(exc, f"start sandbox {name}") from exc
            if reused and isinstance(exc, NotFound):  # its network went meanwhile
                self._forget_network(own_network)
                self.remove(container_id)
                raise NetworkGone(own_network) from exc
            self.remove(container_id)
            raise wrap(exc, f"start sandbox {name}") from exc
        ip = holder.ip if holder else None
        if spec.network != "none" and holder is None:
            networks = self.inspect(container_id)["NetworkSettings"]["Networks"]
            ip = (networks.get(network) or {}).get("IPAddress") or None
        return Container(
            id=container_id, name=name, spec=spec, start_s=time.monotonic() - started, ip=ip
        )

    def remove(self, container_id: str) -> None:
        with self._lock:
            holder = self._holder_of.pop(container_id, None)
            own_network = self._own_networks.pop(container_id, "")
        foreign_holder, own_networks = "", [own_network] if own_network else []
        if holder is None and not own_network:  # made by another process (swept)
            foreign_holder, own_networks = self._leftovers_of(container_id)
        self._remove_container(container_id)
        if holder is not None and not self._keep_spare_holder(holder):
            self._remove_holder(holder)
        if foreign_holder:
            self.remove(foreign_holder)  # a holder's own network is found by its label
        for network in own_networks:
            if not self._keep_spare(network):
                self._remove_sandbox_network(network)

    def network_owner(self, container_id: str) -> dict[str, Any]:
        """The engine's inspect of the container whose network namespace a sandbox uses: its
        network holder's where it joined one, else its own (`HostConfig.NetworkMode`,
        `NetworkSettings.Networks`)."""
        info = self.inspect(container_id)
        mode = str(info["HostConfig"].get("NetworkMode") or "")
        if mode.startswith("container:"):
            return self.network_owner(mode.partition(":")[2])
        return info

    def _leftovers_of(self, container_id: str) -> tuple[str, list[str]]:
        """What goes with a sandbox this process did not make: the holder it joined (a
        network holder's id, or ""), and its own networks (found by their label)."""
        try:
            info = self.api.inspect_container(container_id)
        except NotFound:
            return "", []
        except (DockerException, requests.exceptions.RequestException) as exc:
            log.warning("could not inspect %s: %s", container_id[:12], exc)
            return "", []
        mode = str((info.get("HostConfig") or {}).get("NetworkMode") or "")
        if mode.startswith("container:"):
            joined = mode.partition(":")[2]
            with self._lock:  # one of ours serves another of our sandboxes by now
                ours = {h.id for h in self._holder_of.values()}
                ours |= {h.id for spare in self._spare_holders.values() for h in spare}
            if joined not in ours and self._is_holder(joined):
                return joined, []
            return "", []
        with self._lock:
            ours_networks = set(self._network_of)  # its network may serve one of ours by now
        name = str(info["Name"]).lstrip("/")
        return "", [n for n in self._networks_labelled(name) if n not in ours_networks]

    def _is_holder(self, container_id: str) -> bool:
        try:
            labels = self.api.inspect_container(container_id)["Config"].get("Labels") or {}
        except (DockerException, requests.exceptions.RequestException):
            return False
        return labels.get(HOLDER_LABEL) == "1" and labels.get(DEPLOYMENT_LABEL) == self.deployment

    def release_networks(self) -> None:
        """Remove the spare network holders and sandbox networks (at a worker's stop)."""
        with self._lock:
            self._closed = True
            spare = [n for networks in self._spare_networks.values() for n in networks]
            self._spare_networks.clear()
            holders = [h for spares in self._spare_holders.values() for h in spares]
            self._spare_holders.clear()
        for holder in holders:
            self._remove_holder(holder)
        for network in spare:
            self._forget_network(network)
            self._remove_sandbox_network(network)

    def stopped_at(self, container_id: str) -> float | None:
        """When a stopped container stopped (seconds since the epoch); None when that is not
        known (gone, or never started: Go's zero time)."""
        try:
            finished = engine_time(str(self.inspect(container_id)["State"].get("FinishedAt", "")))
        except SandboxError:
            return None
        return finished if finished is not None and finished > 0 else None

    def oom_killed(self, container_id: str) -> bool:
        try:
            return bool(self.inspect(container_id)["State"].get("OOMKilled"))
        except SandboxError:
            return False

    def usage(self, container_id: str) -> Usage:
        """State and resource use, as evidence of what broke a sandbox's runner.

        A sandbox can stop between the inspect and the stats read (its init taken by the
        OOM killer of a full memory cgroup): the engine then answers the stats with an empty
        body. That is the sandbox's end, not the engine's failure: it is read again, and
        only a running sandbox whose stats cannot be read twice is our error."""
        for attempt in range(STATS_TRIES):
            state = self.inspect(container_id)["State"]
            running, oom = bool(state.get("Running")), bool(state.get("OOMKilled"))
            if not running:
                return Usage(running=False, oom_killed=oom, exit_code=state.get("ExitCode"))
            try:
                stats = self.api.stats(container_id, stream=False, one_shot=True)
                break
            except (DockerException, requests.exceptions.RequestException) as exc:
                if attempt + 1 == STATS_TRIES:
                    raise wrap(exc, f"read the stats of {container_id[:12]}") from exc
        pids = stats.get("pids_stats") or {}
        memory = stats.get("memory_stats") or {}
        detail = memory.get("stats") or {}
        used = memory.get("usage")
        if used is not None:  # the page cache the kernel can drop is not pressure
            used -= int(detail.get("total_inactive_file", detail.get("inactive_file", 0)))
        return Usage(
            running=True,
            oom_killed=oom,
            pids=pids.get("current"),
            pids_limit=pids.get("limit"),
            memory=used,
            memory_limit=memory.get("limit"),
            memory_hits=memory.get("failcnt"),
        )

    def oom_kills(self, container_id: str) -> int | None:
        """How many processes the kernel's OOM killer ended in a running container, read
        from the host's side of its memory cgroup — no exec, which a full cgroup may not
        let start. None where those files are not to be seen (a worker in a container)."""
        for template in MEMORY_CGROUPS:
            try:
                with open(template.format(id=container_id)) as handle:
                    return oom_kill_count(handle.read())
            except OSError:
                continue
        return None

    def set_memory(self, container_id: str, memory_mb: int) -> None:
        """Change a running sandbox's memory limit (swap stays off: memory+swap = memory)."""
        try:
            self.api.update_container(
                container_id, mem_limit=f"{memory_mb}m", memswap_limit=f"{memory_mb}m"
            )
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, f"set the memory limit of {container_id[:12]}") from exc

    def managed_containers(
        self, *, any_deployment: bool = False, **labels: str
    ) -> list[dict[str, Any]]:
        if not any_deployment:
            labels = {DEPLOYMENT_LABEL: self.deployment, **labels}
        filters = [f"{MANAGED_LABEL}=1"] + [f"{k}={v}" for k, v in labels.items()]
        try:
            return list(self.api.containers(all=True, filters={"label": filters}))
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, "list sandboxes") from exc

    def remove_deployment(self, services: Iterable[str] = ()) -> int:
        """Remove this deployment's containers on this engine, the named `services` (its
        honeypot), then its networks no other container is on: at its last worker's stop.
        How many containers went."""
        containers = [str(c["Id"]) for c in self.managed_containers()]
        for container in [*containers, *services]:
            self._remove_container(container)
        try:
            listed = self.api.networks(filters={"label": f"{DEPLOYMENT_LABEL}={self.deployment}"})
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, "list networks") from exc
        for network in listed:
            # another deployment's honeypot on a network ours made keeps it
            with suppress(NotFound, APIError, DockerException):
                if not self.api.inspect_network(network["Id"]).get("Containers"):
                    self.api.remove_network(network["Id"])
        return len(containers)


def oom_kill_count(text: str) -> int | None:
    """The `oom_kill` count of a memory cgroup's `memory.oom_control` (v1) or
    `memory.events` (v2) text; None when it has none."""
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None
