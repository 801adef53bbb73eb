"""The honeypot network: a sandbox's only peer answers everything and remembers it.

A worker makes sure an internal Docker network (no route out) and the honeypot container
on it exist; sandboxes join that network with the honeypot as their DNS server. Contacts
are read back from the honeypot's log by the sandbox's address and the episode's time
window, and become evidence.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from proctor.models import Evidence, EvidenceSource
from workers.sandbox.docker import Engine, SandboxError

log = logging.getLogger(__name__)

HONEYPOT_LABEL = "org.proctor.honeypot"
CATEGORY = "network_fetch"


@cache
def server_source() -> str:
    return Path(__file__).with_name("honeypot_server.py").read_text()


@dataclass(frozen=True, slots=True)
class Hit:
    time: float
    src: str
    proto: str
    port: int
    host: str = ""
    path: str = ""

    def describe(self) -> str:
        target = self.host or "?"
        if self.proto == "http":
            return f"HTTP {target}:{self.port}{self.path}"
        if self.proto == "dns":
            return f"DNS lookup of {target}"
        return f"{self.proto.upper()} connection to {target or 'port'}:{self.port}"


class Honeypot:
    def __init__(self, engine: Engine, *, network: str, image: str, name: str) -> None:
        self.engine = engine
        self.network = network
        self.image = image
        self.name = name
        self.address: str | None = None

    def ensure(self) -> str:
        """Make the network and the honeypot exist; returns the honeypot's address."""
        self.engine.ensure_internal_network(self.network)
        info = self.engine.ensure_service(
            self.name,
            image=self.image,
            command=["python3", "-I", "-c", server_source()],
            network=self.network,
            user="1000:1000",
            # ports under 1024 without any capability: the sysctl is per network namespace
            sysctls={"net.ipv4.ip_unprivileged_port_start": "0"},
            labels={HONEYPOT_LABEL: "1"},
        )
        networks = info["NetworkSettings"]["Networks"]
        address = (networks.get(self.network) or {}).get("IPAddress")
        if not address:
            raise SandboxError(f"the honeypot {self.name} has no address on {self.network}")
        self.address = str(address)
        return self.address

    def hits(self, source: str, *, since: float, until: float) -> list[Hit]:
        """Contacts from one sandbox address within a time window."""
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
            if raw.get("src") != source or not since - 1 <= raw.get("time", 0) <= until + 1:
                continue
            hits.append(
                Hit(
                    time=raw["time"],
                    src=raw["src"],
                    proto=raw["proto"],
                    port=int(raw.get("port", 0)),
                    host=raw.get("host", ""),
                    path=raw.get("path", ""),
                )
            )
        return hits


def evidence(hits: list[Hit]) -> list[Evidence]:
    return [
        Evidence(source=EvidenceSource.honeypot, category=CATEGORY, detail=hit.describe())
        for hit in hits
    ]
