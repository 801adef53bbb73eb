"""The honeypot network: a sandbox's only peer answers everything and remembers it.

A worker makes sure the honeypot container exists (once per engine, on an internal Docker
network of its own: no route out, no traffic between members). Each sandbox then gets a
network of its own with the honeypot as its only other member, its DNS server and its
default route, so no sandbox can reach another and a connection to any address — a name or
a raw IP, TCP, UDP or ping, any port — is the honeypot's. Contacts are read back from the
honeypot's log by the sandbox's address and the episode's time window, and become evidence.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from proctor.models import CheatCategory, Evidence, EvidenceSource
from workers.sandbox.engine import Engine, SandboxError

log = logging.getLogger(__name__)

HONEYPOT_LABEL = "org.proctor.honeypot"
VERSION_LABEL = "org.proctor.honeypot-version"  # a honeypot of other code is replaced
CATEGORY = CheatCategory.network_fetch
ENSURE_TRIES = 4
READY_S = 10.0  # for its "ready" line once it runs: its routing set up, its sockets open
# in its own namespaces only, and dropped once its routing and sockets are set up
CAPABILITIES = ["NET_ADMIN", "NET_RAW", "SETUID", "SETGID"]


@cache
def server_source() -> str:
    return Path(__file__).parent.joinpath("assets", "honeypot_server.py").read_text()


def server_version() -> str:
    return hashlib.sha256(server_source().encode()).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class Hit:
    time: float
    src: str
    proto: str
    port: int
    host: str = ""
    path: str = ""
    count: int = 1  # a "suppressed" line stands for this many contacts
    dst: str = ""  # the address the sandbox dialled (the honeypot's own for a name)

    def describe(self) -> str:
        target = self.host or self.dst or "?"
        if self.proto == "suppressed":
            return f"{self.count} more contacts within a second (not itemised)"
        if self.proto == "http":
            return f"HTTP {target}:{self.port}{self.path}"
        if self.proto == "dns":
            at = f" (asked {self.dst})" if self.dst else ""
            return f"DNS lookup of {target}{at}"
        if self.proto == "icmp":
            return f"ping of {target}"
        if self.proto == "udp":
            return f"UDP datagram to {target}:{self.port}"
        return f"{self.proto.upper()} connection to {target}:{self.port}"


class Honeypot:
    def __init__(
        self,
        engine: Engine,
        *,
        network: str,
        image: str,
        name: str,
        subnets: str = "10.213.0.0/16",
    ) -> None:
        self.engine = engine
        self.network = network
        self.image = image
        self.name = name
        self.subnets = subnets
        self.address: str | None = None

    def ensure(self) -> str:
        """Make the network and the honeypot exist, and have every sandbox asking for the
        network get its own with the honeypot on it; returns the honeypot's address on its
        home network. Safe to run from many workers at once: while they converge on one
        network, one of them may find it gone or the honeypot elsewhere, and looks again."""
        for attempt in range(ENSURE_TRIES):
            try:
                network_id, address = self._ensure_once()
                # another worker's network of the same name may have become visible only
                # after ours was made, and be older: then everyone settles on that one
                settled = self.engine.ensure_internal_network(self.network, peer=self.name)
                if settled != network_id:
                    raise SandboxError(f"an older network {self.network} turned up")
            except SandboxError as exc:
                if attempt == ENSURE_TRIES - 1:
                    raise
                log.info("honeypot %s not settled yet (%s): looking again", self.name, exc)
                continue
            if address:
                self._wait_ready()
                self.engine.isolate(self.network, peer=self.name, subnets=self.subnets)
                pruned = self.engine.prune_sandbox_networks()
                if pruned:
                    log.info("removed %d sandbox networks left by dead workers", pruned)
                self.address = address
                return address
        raise SandboxError(f"the honeypot {self.name} has no address on {self.network}")

    def _ensure_once(self) -> tuple[str, str | None]:
        """The network's id, and the honeypot's address on it (None: not there yet)."""
        network_id = self.engine.ensure_internal_network(self.network, peer=self.name)
        info = self.engine.ensure_service(
            self.name,
            image=self.image,
            command=["python3", "-I", "-c", server_source()],
            network=network_id,
            user="0:0",  # with CAPABILITIES only, until it becomes 1000:1000 (see the server)
            cap_add=CAPABILITIES,
            sysctls={
                # ports under 1024 without any capability: the sysctl is per network namespace
                "net.ipv4.ip_unprivileged_port_start": "0",
                # on every sandbox's network at once: it must never route between them
                "net.ipv4.ip_forward": "0",
            },
            labels={HONEYPOT_LABEL: "1", VERSION_LABEL: server_version()},
        )
        networks = info["NetworkSettings"]["Networks"] or {}
        address = next(
            (n.get("IPAddress") for n in networks.values() if n.get("NetworkID") == network_id),
            None,
        )
        return network_id, str(address) if address else None

    def _wait_ready(self) -> None:
        """Running is not enough: one that could not set up its routing (every address is
        its own) exits, and would leave raw-IP contacts unrecorded. Wait for its "ready" —
        or for it to have run READY_S without a restart (its log may have rotated since)."""
        deadline = time.monotonic() + READY_S
        while True:
            info = self.engine.inspect(self.name)
            started = _started_at(info)
            if info["State"].get("Running") and time.time() - started > READY_S:
                return
            text = self.engine.logs(self.name, since=started - 1, until=time.time() + 1)
            for line in text.splitlines():
                try:
                    raw = json.loads(line)
                except ValueError:
                    continue
                if raw.get("proto") == "ready" and raw.get("time", 0) >= started - 1:
                    return
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"the honeypot {self.name} runs but never said it is ready "
                    f"(state {info['State'].get('Status')}, "
                    f"{info['State'].get('Error') or 'see its log'})"
                )
            time.sleep(0.2)

    def hits(self, source: str, *, since: float, until: float) -> list[Hit]:
        """Contacts from one sandbox address within a time window. Its start is exact (the
        honeypot stamps a contact with the clock the worker read `since` from): a pooled
        sandbox's address served the episode before, whose last contacts may be only just
        earlier, and they are not this episode's."""
        try:
            text = self.engine.logs(self.name, since=since - 1, until=until + 1)
        except SandboxError as exc:
            log.warning("honeypot log unreadable: %s", exc)
            return []
        hits = []
        for line in text.splitlines():
            try:
                raw = json.loads(line)
            except ValueError:
                continue
            if raw.get("src") != source or not since <= raw.get("time", 0) <= until + 1:
                continue
            hits.append(
                Hit(
                    time=raw["time"],
                    src=raw["src"],
                    proto=raw["proto"],
                    port=int(raw.get("port", 0)),
                    host=raw.get("host", ""),
                    path=raw.get("path", ""),
                    count=int(raw.get("count", 1)),
                    dst=raw.get("dst", ""),
                )
            )
        return hits


def _started_at(info: dict[str, Any]) -> float:
    """When the container last started (seconds since the epoch); now if unreadable."""
    raw = str((info.get("State") or {}).get("StartedAt", ""))
    head, dot, rest = raw.partition(".")
    if dot:  # Go writes up to 9 fraction digits, Python reads 6
        raw = f"{head}.{rest.rstrip('Z')[:6]}+00:00"
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()


MAX_EVIDENCE = 50


# the rule id of a contact on record only: a name that can hold nothing (`on_record`)
INERT = "honeypot.inert-host"


def evidence(
    hits: list[Hit],
    step_of: Callable[[float], int | None] | None = None,
    on_record: Callable[[str], bool] | None = None,
) -> list[Evidence]:
    """One item per distinct contact (per step, when `step_of` says during which step each
    was made), repeats counted: a flood stays a readable result. A contact whose host
    `on_record` names (one reserved for examples, an echo service) carries the rule `INERT`:
    on record only."""
    counts: dict[tuple[int | None, str, bool], int] = {}
    for hit in hits:
        inert = bool(on_record and hit.host and on_record(hit.host))
        key = (step_of(hit.time) if step_of else None, hit.describe(), inert)
        counts[key] = counts.get(key, 0) + 1
    items = [
        Evidence(
            source=EvidenceSource.honeypot,
            category=CATEGORY,
            rule=INERT if inert else None,
            detail=detail if count == 1 else f"{detail} ({count} times)",
            step=step,
        )
        for (step, detail, inert), count in list(counts.items())[:MAX_EVIDENCE]
    ]
    if len(counts) > MAX_EVIDENCE:
        items.append(
            Evidence(
                source=EvidenceSource.honeypot,
                category=CATEGORY,
                detail=f"{len(counts) - MAX_EVIDENCE} more distinct contacts",
            )
        )
    return items
