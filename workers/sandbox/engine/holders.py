"""Network holders: tiny containers whose network namespace fresh sandboxes join one at a
time (`Holder`), made, kept spare and removed here."""

from __future__ import annotations

import logging

import docker
import requests
from docker.errors import DockerException

from workers.sandbox.engine.constants import (
    DEPLOYMENT_LABEL,
    HOLDER_LABEL,
    HOLDER_MEMORY_MB,
    HOLDER_PIDS,
    HOLDER_RUNTIMES,
    HOLDER_TRIES,
    HOST_LABEL,
    MANAGED_LABEL,
    SPARE_NETWORKS,
    WORKER_LABEL,
)
from workers.sandbox.engine.errors import ImageMissing, SandboxError, wrap
from workers.sandbox.engine.networks import Networks
from workers.sandbox.engine.specs import Holder, SandboxSpec

log = logging.getLogger(__name__)


class Holders(Networks):
    """Network holders: made, handed on, kept spare, removed."""

    def _joins_holder(self, spec: SandboxSpec) -> bool:
        """Whether a sandbox joins a network holder: a fresh sandbox of a runtime that takes
        the namespace's interfaces, asking for no network or for one the honeypot isolates
        (a shared network alone would put every sandbox of a holder's life on it at once)."""
        if spec.pooled or spec.runtime not in HOLDER_RUNTIMES:
            return False  # a pooled sandbox lives long: a namespace of its own costs it once
        with self._lock:
            return spec.network == "none" or spec.network in self._isolation

    def _take_holder(self, spec: SandboxSpec, name: str, *, reuse: bool) -> tuple[Holder, bool]:
        """A spare holder for the network the sandbox asks for, or a new one; whether it
        served a sandbox before."""
        with self._lock:
            spare = self._spare_holders.get(spec.network)
            if spare and reuse:
                return spare.pop(), True
        for attempt in range(HOLDER_TRIES):
            try:
                suffix = f"-{attempt + 1}" if attempt else ""
                return self._make_holder(spec, f"{name}{suffix}-netns"), False
            except ImageMissing:
                raise
            except SandboxError as exc:  # the engine refused a start now and then
                if attempt + 1 == HOLDER_TRIES:
                    raise
                log.warning("a network holder for %s did not start (%s): once more", name, exc)
        raise AssertionError("unreachable")

    def _make_holder(self, spec: SandboxSpec, name: str) -> Holder:
        own_network, dns = "", None
        mode = spec.network
        if spec.network != "none":
            with self._lock:
                isolation = self._isolation[spec.network]
            own_network, peer_ip = self._create_sandbox_network(
                f"{name}-net", isolation, sandbox=name
            )
            with self._lock:
                self._network_of[own_network] = (spec.network, peer_ip)
            mode, dns = own_network, [peer_ip]
        host_config = self.api.create_host_config(
            network_mode=mode,
            dns=dns,
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=f"{HOLDER_MEMORY_MB}m",
            memswap_limit=f"{HOLDER_MEMORY_MB}m",
            pids_limit=HOLDER_PIDS,
            runtime=spec.runtime,
            log_config=docker.types.LogConfig(type="none"),
        )
        labels = {
            MANAGED_LABEL: "1",
            HOLDER_LABEL: "1",
            WORKER_LABEL: self.worker,
            HOST_LABEL: self.host,
            DEPLOYMENT_LABEL: self.deployment,
        }
        holder_id, ip = "", None
        try:
            created = self.api.create_container(
                self.holder_image or spec.image,
                entrypoint=["sleep"],
                command=["infinity"],
                user="0:0",  # out of reach of the sandbox user, in a pid namespace of its own
                name=name,
                hostname="sandbox",
                labels=labels,
                host_config=host_config,
                network_disabled=spec.network == "none",
            )
            holder_id = str(created["Id"])
            self.api.start(holder_id)
            if own_network:
                networks = self.inspect(holder_id)["NetworkSettings"]["Networks"]
                ip = (networks.get(own_network) or {}).get("IPAddress") or None
        except (DockerException, requests.exceptions.RequestException, SandboxError) as exc:
            self._remove_holder(Holder(holder_id, name, spec.network, own_network, None))
            raise wrap(exc, f"make a network holder from {spec.image}") from exc
        return Holder(holder_id, name, spec.network, own_network, ip)

    def _keep_spare_holder(self, holder: Holder) -> bool:
        """Keep a removed sandbox's holder for the next one, if few are kept yet."""
        with self._lock:
            spare = self._spare_holders.setdefault(holder.network, [])
            if self._closed or len(spare) >= SPARE_NETWORKS:
                return False
            spare.append(holder)
            return True

    def _forget_holder(self, container_id: str) -> None:
        with self._lock:
            self._holder_of.pop(container_id, None)

    def _remove_holder(self, holder: Holder) -> None:
        """Remove a holder (no sandbox in it any more), then its own network."""
        if holder.id:
            self._remove_container(holder.id)
        if holder.own_network:
            self._forget_network(holder.own_network)
            self._remove_sandbox_network(holder.own_network)
