"""Long-lived service containers (the honeypot) on a network, made once per deployment and
joined to the networks that need them."""

from __future__ import annotations

import logging
import time
from contextlib import suppress
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, NotFound

from workers.sandbox.engine.constants import MANAGED_LABEL, SERVICE_START_S
from workers.sandbox.engine.errors import SandboxError, wrap
from workers.sandbox.engine.networks import Networks, network_age

log = logging.getLogger(__name__)


class Services(Networks):
    """Service containers (the honeypot) and the networks they join."""

    def ensure_service(
        self,
        name: str,
        *,
        image: str,
        command: list[str],
        network: str,
        user: str,
        sysctls: dict[str, str],
        labels: dict[str, str],
        cap_add: list[str] | None = None,
    ) -> dict[str, Any]:
        """A long-running helper container (the honeypot), one per engine, running and on
        `network` (an id); its inspect. `cap_add`: the only capabilities it gets (in its own
        namespaces: the honeypot sets up its own routing with them, then drops them).

        Many workers may call this at once: a name conflict means another made it, so we
        use theirs; one that is not running is started, never removed (it may be another
        worker's, made a moment ago); only one made from another image or other labels (an
        older version) is replaced.
        """
        deadline = time.monotonic() + SERVICE_START_S
        while True:
            info = self._inspect_service(name)
            if info is not None and not _same_service(info, image, labels):
                log.info("replacing %s: made from another image or version", name)
                with suppress(NotFound):  # gone already: done
                    self.api.remove_container(name, force=True)
                info = None
            if info is None:
                self._create_service(
                    name,
                    image=image,
                    command=command,
                    network=network,
                    user=user,
                    sysctls=sysctls,
                    labels=labels,
                    cap_add=cap_add,
                )
            problem = ""
            try:
                self.api.start(name)  # a no-op when it runs already
            except NotFound as exc:
                # gone, or made on a network that lost the race since: one that never ran
                # is nobody's yet, so it can go and be made again
                problem = str(exc)
                info = self._inspect_service(name)
                if info is not None and info["State"].get("Status") == "created":
                    with suppress(NotFound):
                        self.api.remove_container(name, force=True)
            except (DockerException, requests.exceptions.RequestException) as exc:
                problem = str(exc)  # restarting meanwhile, say: look again
            info = self._inspect_service(name)
            if info is not None and info["State"].get("Running"):
                self._join(name, network, info)
                return self._inspect_service(name) or info
            if time.monotonic() > deadline:
                state = info["State"] if info else "gone"
                raise SandboxError(f"{name} does not stay running ({state}) {problem}".strip())
            time.sleep(0.2)

    def _inspect_service(self, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.api.inspect_container(name))
        except NotFound:
            return None
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, f"inspect {name}") from exc

    def _create_service(
        self,
        name: str,
        *,
        image: str,
        command: list[str],
        network: str,
        user: str,
        sysctls: dict[str, str],
        labels: dict[str, str],
        cap_add: list[str] | None = None,
    ) -> None:
        host_config = self.api.create_host_config(
            network_mode=network,
            read_only=True,
            cap_drop=["ALL"],
            cap_add=cap_add or None,
            security_opt=["no-new-privileges"],
            sysctls=sysctls,
            mem_limit="128m",
            pids_limit=256,
            restart_policy={"Name": "unless-stopped"},
            ulimits=[docker.types.Ulimit(name="nofile", soft=4096, hard=4096)],
            log_config=docker.types.LogConfig(
                type="json-file", config={"max-size": "20m", "max-file": "3"}
            ),
        )
        try:
            self.api.create_container(
                image,
                command=command,
                name=name,
                user=user,
                labels={MANAGED_LABEL: "1", **labels},
                host_config=host_config,
            )
        except APIError as exc:
            if exc.status_code != 409:  # 409: another worker made it first, use theirs
                raise wrap(exc, f"create {name}") from exc
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, f"create {name}") from exc

    def _join(self, name: str, network_id: str, info: dict[str, Any]) -> None:
        """Put a running service on the network if it is not (the network was recreated).

        If it is on another network of the same name, the older of the two wins, as in
        `ensure_internal_network`: an older one stays (the caller finds the service not on
        its network and looks again), a newer one is left and removed.
        """
        joined = info["NetworkSettings"].get("Networks") or {}
        if any(n.get("NetworkID") == network_id for n in joined.values()):
            return
        try:
            wanted = dict(self.api.inspect_network(network_id))
            other = (joined.get(str(wanted["Name"])) or {}).get("NetworkID")
            if other:
                try:
                    if network_age(dict(self.api.inspect_network(other))) < network_age(wanted):
                        return
                except NotFound:
                    pass
                with suppress(NotFound):  # gone already: done
                    self.api.disconnect_container_from_network(name, other, force=True)
                self._remove_network_quietly(str(other))
            self.api.connect_container_to_network(name, network_id)
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, f"connect {name} to {network_id[:12]}") from exc

    def logs(self, name: str, *, since: float, until: float) -> str:
        try:
            raw = self.api.logs(
                name,
                stdout=True,
                stderr=False,
                since=int(since),
                until=int(until) + 1,
                timestamps=False,
            )
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, f"read the log of {name}") from exc
        return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)


def _same_service(info: dict[str, Any], image: str, labels: dict[str, str]) -> bool:
    config = info.get("Config") or {}
    have = config.get("Labels") or {}
    return config.get("Image") == image and all(have.get(k) == v for k, v in labels.items())
