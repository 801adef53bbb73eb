"""The engine's client and the state its parts share (`EngineBase`): the Docker client,
the worker's identity, the images' cached digests and configurations, the spare networks
and holders; the engine's runtimes."""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, NotFound

from workers.sandbox.engine.constants import API_TIMEOUT_S
from workers.sandbox.engine.errors import DockerUnavailable, wrap
from workers.sandbox.engine.specs import Holder, Isolation

log = logging.getLogger(__name__)


class EngineBase:
    """The Docker client and what the engine's parts share; the engine's runtimes."""

    def __init__(
        self,
        *,
        worker: str,
        host: str,
        deployment: str,
        base_url: str | None = None,
        holder_image: str | None = None,
    ) -> None:
        try:
            if base_url:
                self.client = docker.DockerClient(base_url=base_url, timeout=API_TIMEOUT_S)
            else:
                self.client = docker.from_env(timeout=API_TIMEOUT_S)
        except DockerException as exc:
            raise DockerUnavailable(f"cannot reach the Docker engine: {exc}") from exc
        self.api = self.client.api
        self.worker = worker
        self.host = host
        self.deployment = deployment
        # What network holders are made from: one of the deployment's own images, never a
        # task's (a holder outlives its sandbox and serves the next ones, of any image).
        # None: the sandbox's image (a deployment that serves only its own images).
        self.holder_image = holder_image
        self._digests: dict[str, str] = {}
        self._configs: dict[str, dict[str, Any]] = {}  # image → its `Config` (`untrusted`)
        self._lock = threading.Lock()
        self._isolation: dict[str, Isolation] = {}  # see `isolate`
        self._own_networks: dict[str, str] = {}  # sandbox container id → its own network
        # A sandbox's own network outlives it, for the next sandbox: making one (a bridge,
        # its firewall rules, the peer joining it) costs the engine more than the container
        # itself. Own network → (the shared network it stands for, the peer's address).
        self._network_of: dict[str, tuple[str, str]] = {}
        self._spare_networks: dict[str, list[str]] = {}  # shared network → idle own ones
        self._holder_of: dict[str, Holder] = {}  # sandbox container id → the holder it joined
        self._spare_holders: dict[str, list[Holder]] = {}  # asked-for network → idle holders
        self._closed = False

    def ping(self) -> None:
        try:
            self.api.ping()
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise DockerUnavailable(f"the Docker engine does not answer: {exc}") from exc

    def runtimes(self) -> set[str]:
        """The OCI runtimes registered with the engine (runc and those of its daemon.json)."""
        try:
            return set(self.api.info().get("Runtimes") or {})
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, "list the engine's runtimes") from exc

    def inspect(self, container_id: str) -> dict[str, Any]:
        try:
            return dict(self.api.inspect_container(container_id))
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, f"inspect {container_id[:12]}") from exc

    def _remove_container(self, container_id: str) -> None:
        try:
            self.api.remove_container(container_id, force=True, v=True)
        except NotFound:
            pass
        except APIError as exc:
            if exc.status_code != 409:  # 409: removal already in progress
                log.warning("could not remove container %s: %s", container_id[:12], exc)
        except (DockerException, requests.exceptions.RequestException) as exc:
            log.warning("could not remove container %s: %s", container_id[:12], exc)


def engine_time(raw: str) -> float | None:
    """An engine's time (RFC 3339, as Go writes it) in seconds since the epoch."""
    head, dot, rest = raw.partition(".")
    if dot:  # Go writes up to 9 fraction digits, Python reads 6
        digits = rest[: len(rest) - len(rest.lstrip("0123456789"))]
        raw = f"{head}.{digits[:6].ljust(6, '0')}{rest[len(digits) :]}"
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
