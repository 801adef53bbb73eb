"""Networks: the shared internal network under its deterministic name, and each sandbox's
own network beside the honeypot (`Isolation`), kept spare for the next sandbox and
pruned when no sandbox uses it."""

from __future__ import annotations

import ipaddress
import logging
import random
import time
from collections.abc import Iterable
from contextlib import suppress
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, NotFound

from workers.sandbox.engine.base import EngineBase, engine_time
from workers.sandbox.engine.constants import (
    DEPLOYMENT_LABEL,
    ICC_OPTION,
    MANAGED_LABEL,
    NETWORK_PRUNE_AGE_S,
    NO_HOST_ADDRESS_OPTION,
    NO_MASQUERADE_OPTION,
    SANDBOX_NETWORK_LABEL,
    SANDBOX_PREFIX,
    SPARE_NETWORKS,
    SUBNET_TRIES,
)
from workers.sandbox.engine.errors import SandboxError, wrap
from workers.sandbox.engine.specs import Isolation, SandboxSpec

log = logging.getLogger(__name__)


class Networks(EngineBase):
    """The shared internal network and sandboxes' own networks."""

    def ensure_internal_network(self, name: str, *, peer: str | None = None) -> str:
        """The shared internal network (no route out, no traffic between its members) under
        its deterministic name; returns its id, which callers use from then on.

        Docker's duplicate check races, so workers starting together can each make one. All
        of them converge on the oldest of the name and remove the others (Docker refuses to
        remove one in use, so only an unused duplicate goes); the id is never ambiguous. One
        made by an older version, with traffic between members on, is recreated when nothing
        but `peer` is on it.
        """
        for _ in range(4):
            found = self._networks_named(name)
            if not found:
                self._create_internal_network(name)
                found = self._networks_named(name)
            if not found:
                continue  # removed between our create and our look: once more
            winner, *losers = sorted(found, key=network_age)
            for loser in losers:
                self._remove_network_quietly(str(loser["Id"]), peer=peer)
            if (winner.get("Options") or {}).get(ICC_OPTION) == "false":
                return str(winner["Id"])
            if not self._recreate_with_icc_off(str(winner["Id"]), name, peer):
                return str(winner["Id"])
        raise SandboxError(f"the network {name} disappears as soon as it is made")

    def _create_internal_network(self, name: str) -> None:
        try:
            self.api.create_network(
                name,
                driver="bridge",
                internal=True,
                check_duplicate=True,
                options={ICC_OPTION: "false"},
                labels={MANAGED_LABEL: "1", DEPLOYMENT_LABEL: self.deployment},
            )
        except APIError as exc:
            if exc.status_code != 409:  # 409: it exists already, which is what we want
                raise wrap(exc, f"create network {name}") from exc
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, f"create network {name}") from exc

    def _recreate_with_icc_off(self, network_id: str, name: str, peer: str | None) -> bool:
        """Drop an older version's network (members could talk to each other) if only `peer`
        is on it; False when others still are (they keep it; our sandboxes never join it)."""
        try:
            members = self._members(network_id)
            names = set(members.values())
            if names - {peer}:
                log.warning(
                    "network %s lets its members talk to each other and %d containers "
                    "of an older version are on it: left as it is",
                    name,
                    len(names),
                )
                return False
            log.info("recreating network %s with traffic between its members off", name)
            self._disconnect_all(network_id, members)
            self.api.remove_network(network_id)
        except NotFound:
            pass  # another worker is migrating it too
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, f"recreate network {name}") from exc
        return True

    def _members(self, network_id: str) -> dict[str, str]:
        """The containers on a network: id → name."""
        members = self.api.inspect_network(network_id).get("Containers") or {}
        return {str(cid): str(m.get("Name", "")) for cid, m in members.items()}

    def _disconnect_all(self, network_id: str, members: Iterable[str]) -> None:
        for member in members:
            self.api.disconnect_container_from_network(member, network_id, force=True)

    def _networks_named(self, name: str) -> list[dict[str, Any]]:
        try:
            listed = self.api.networks(names=[name])
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, f"list networks named {name}") from exc
        return [dict(n) for n in listed if n.get("Name") == name]

    def _remove_network_quietly(self, network_id: str, *, peer: str | None = None) -> None:
        """Remove a network nobody uses but `peer` (a worker that settled on it for a moment
        put it there; it is taken off first); one in use stays (Docker refuses, we log it)."""
        try:
            if peer is not None:
                members = self._members(network_id)
                if set(members.values()) == {peer}:
                    self._disconnect_all(network_id, members)
            self.api.remove_network(network_id)
        except NotFound:
            pass
        except (DockerException, requests.exceptions.RequestException) as exc:
            log.info("left network %s in place: %s", network_id[:12], exc)

    def isolate(self, network: str, *, peer: str, subnets: str) -> None:
        """From now on a sandbox asking for `network` gets a network of its own instead, with
        `peer` its only other member; the subnets come from `subnets`."""
        try:
            pool = ipaddress.IPv4Network(subnets)
        except ValueError as exc:
            raise SandboxError(f"sandbox subnets {subnets!r}: {exc}") from exc
        if pool.prefixlen > SANDBOX_PREFIX:
            raise SandboxError(f"sandbox subnets {subnets}: smaller than one /{SANDBOX_PREFIX}")
        with self._lock:
            self._isolation[network] = Isolation(peer=peer, subnets=pool)

    def _sandbox_network(
        self, spec: SandboxSpec, name: str, *, reuse: bool
    ) -> tuple[str, list[str] | None, str, bool]:
        """Network mode and DNS servers for a new sandbox, its own network if it has one, and
        whether that network served a sandbox before (one at a time, never two at once)."""
        if spec.network == "none":
            return "none", None, "", False
        with self._lock:
            isolation = self._isolation.get(spec.network)
            spare = self._spare_networks.get(spec.network)
            reused = spare.pop() if spare and reuse else None
            peer_ip = self._network_of[reused][1] if reused else ""
        if isolation is None:  # the shared network alone: its members cannot reach each other
            return spec.network, list(spec.dns) or None, "", False
        if reused:
            return reused, [peer_ip], reused, True
        network, peer_ip = self._create_sandbox_network(f"{name}-net", isolation, sandbox=name)
        with self._lock:
            self._network_of[network] = (spec.network, peer_ip)
        return network, [peer_ip], network, False

    def _create_sandbox_network(
        self, name: str, isolation: Isolation, *, sandbox: str
    ) -> tuple[str, str]:
        """A /29 of its own with the peer on it; its name and the peer's address.

        The sandbox's default route is the network's gateway, an address nobody on the host
        owns (no host address on the bridge) and the peer answers for, so a packet to any
        address reaches the peer and nothing else. Not Docker-`internal`: that drops, on the
        host, every frame whose destination is outside the subnet — the very packets the
        peer must see (a raw IP). Nothing can leave either way: the host owns no address
        here to route through, masquerading is off, and the peer forwards nothing.
        """
        labels = {
            MANAGED_LABEL: "1",
            DEPLOYMENT_LABEL: self.deployment,
            SANDBOX_NETWORK_LABEL: sandbox,
        }
        for _ in range(SUBNET_TRIES):
            subnet = _random_subnet(isolation.subnets)
            gateway, peer_ip = (str(host) for host in list(subnet.hosts())[:2])
            ipam = docker.types.IPAMConfig(
                pool_configs=[docker.types.IPAMPool(subnet=str(subnet), gateway=gateway)]
            )
            try:
                self.api.create_network(
                    name,
                    driver="bridge",
                    internal=False,
                    ipam=ipam,
                    labels=labels,
                    check_duplicate=True,
                    options={NO_HOST_ADDRESS_OPTION: "true", NO_MASQUERADE_OPTION: "false"},
                )
            except APIError as exc:
                if exc.status_code == 403 and "overlap" in str(exc.explanation):
                    continue  # another sandbox has this subnet: draw again
                raise wrap(exc, f"create network {name}") from exc
            except (DockerException, requests.exceptions.RequestException) as exc:
                raise wrap(exc, f"create network {name}") from exc
            try:
                self.api.connect_container_to_network(isolation.peer, name, ipv4_address=peer_ip)
            except (DockerException, requests.exceptions.RequestException) as exc:
                self._remove_sandbox_network(name)
                raise wrap(exc, f"connect {isolation.peer} to {name}") from exc
            return name, peer_ip
        raise SandboxError(
            f"no free /{SANDBOX_PREFIX} in {isolation.subnets} after {SUBNET_TRIES} draws"
        )

    def _remove_sandbox_network(self, network: str, *, peers: set[str] | None = None) -> None:
        """Disconnect whatever is left on a sandbox's own network (its peer; with `peers`,
        those only: a sandbox that joined meanwhile keeps it), then remove it.

        The engine may still be releasing the sandbox's endpoint a moment after the removal
        of the container returned ("active endpoints"): then look again, a few times.
        """
        for attempt in range(4):
            try:
                members = self.api.inspect_network(network).get("Containers") or {}
                for member, about in members.items():
                    if peers is not None and about.get("Name") not in peers:
                        continue
                    # gone already, or the engine no longer counts it connected: either
                    # way removing the network is what is left to do
                    with suppress(NotFound, APIError):
                        self.api.disconnect_container_from_network(member, network, force=True)
                self.api.remove_network(network)
                return
            except NotFound:
                return
            except APIError as exc:
                if exc.status_code != 403 or attempt == 3:
                    log.warning("could not remove sandbox network %s: %s", network, exc)
                    return
                time.sleep(0.1 * (attempt + 1))
            except (DockerException, requests.exceptions.RequestException) as exc:
                log.warning("could not remove sandbox network %s: %s", network, exc)
                return

    def _networks_labelled(self, sandbox: str) -> list[str]:
        """The own networks of a sandbox or holder, by its name (their label)."""
        try:
            listed = self.api.networks(filters={"label": f"{SANDBOX_NETWORK_LABEL}={sandbox}"})
        except (DockerException, requests.exceptions.RequestException) as exc:
            log.warning("could not find the networks of %s: %s", sandbox, exc)
            return []
        return [str(n["Name"]) for n in listed]

    def prune_sandbox_networks(self) -> int:
        """Remove this deployment's sandbox networks that no sandbox is on (a worker killed
        between making one and removing it, or the spares of a worker that stopped); how
        many went. A live worker's spare may go too: it makes another when it finds it gone."""
        try:
            listed = self.api.networks(
                filters={"label": [SANDBOX_NETWORK_LABEL, f"{DEPLOYMENT_LABEL}={self.deployment}"]}
            )
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, "list sandbox networks") from exc
        with self._lock:
            peers = {isolation.peer for isolation in self._isolation.values()}
            mine = set(self._network_of)
        removed = 0
        for network in listed:
            if time.time() - network_age(network)[0] < NETWORK_PRUNE_AGE_S:
                continue  # its sandbox may be being made right now
            if network.get("Name") in mine:
                continue
            try:
                members = self.api.inspect_network(network["Id"]).get("Containers") or {}
            except NotFound:
                continue
            except (DockerException, requests.exceptions.RequestException) as exc:
                raise wrap(exc, f"inspect network {network.get('Name')}") from exc
            if any(m.get("Name") not in peers for m in members.values()):
                continue  # a sandbox is on it
            self._remove_sandbox_network(str(network["Id"]), peers=peers)
            removed += 1
        return removed

    def _keep_spare(self, network: str) -> bool:
        """Keep a removed sandbox's own network for the next one, if few are kept yet."""
        with self._lock:
            shared = self._network_of.get(network, ("", ""))[0]
            spare = self._spare_networks.setdefault(shared, [])
            if not shared or self._closed or len(spare) >= SPARE_NETWORKS:
                self._network_of.pop(network, None)
                return False
            spare.append(network)
            return True

    def _forget_network(self, network: str) -> None:
        with self._lock:
            self._network_of.pop(network, None)


def network_age(network: dict[str, Any]) -> tuple[float, str]:
    """When a network was made (seconds since the epoch), then its id: a total order."""
    created = engine_time(str(network.get("Created", "")))
    return float("inf") if created is None else created, str(network.get("Id", ""))


def _random_subnet(pool: ipaddress.IPv4Network) -> ipaddress.IPv4Network:
    count = 1 << (SANDBOX_PREFIX - pool.prefixlen)
    start = int(pool.network_address) + random.randrange(count) * (1 << (32 - SANDBOX_PREFIX))
    return ipaddress.IPv4Network((start, SANDBOX_PREFIX))
