"""The engine's images: whether one can run here and its digest, a task image's pull (bounded,
with the client's credentials), a path read out of one, its configuration (what
`workers/sandbox/untrusted.py` overrides), and its removal (the pull cache's)."""

from __future__ import annotations

import threading
from typing import Any, BinaryIO

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound

from workers.sandbox.engine.base import EngineBase
from workers.sandbox.engine.constants import (
    DEPLOYMENT_LABEL,
    HOST_LABEL,
    MANAGED_LABEL,
    WORKER_LABEL,
)
from workers.sandbox.engine.errors import (
    ImageNotInRegistry,
    PathTooLarge,
    PullFailed,
    not_in_registry,
    wrap,
)


class Images(EngineBase):
    """Images: inspected, pulled, read out of, removed."""

    def image_problem(self, image: str) -> str | None:
        """Why this engine cannot run `image` now (None when it can); never cached."""
        try:
            self.api.inspect_image(image)
        except ImageNotFound:
            with self._lock:
                self._digests.pop(image, None)
                self._configs.pop(image, None)
            return f"the image {image} is not on this Docker engine"
        except (DockerException, requests.exceptions.RequestException) as exc:
            return str(wrap(exc, f"inspect image {image}"))
        return None

    def image_digest(self, image: str) -> str:
        """The content digest of a local image (the repo digest when it has one)."""
        with self._lock:
            cached = self._digests.get(image)
        if cached:
            return cached
        try:
            info = self.api.inspect_image(image)
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, f"inspect image {image}") from exc
        digests = info.get("RepoDigests") or []
        digest = digests[0].split("@", 1)[-1] if digests else str(info["Id"])
        with self._lock:
            self._digests[image] = digest
        return digest

    def read_path(self, image: str, path: str, into: BinaryIO, *, max_bytes: int) -> bool:
        """Write a tar of `path` in `image` to `into`, read from a container that is created
        and never started (nothing of the image runs); False when the image has no such
        path. Over `max_bytes`: PathTooLarge."""
        try:
            created = self.api.create_container(
                image,
                command=["/proctor-never-started"],
                entrypoint=[],
                labels={
                    MANAGED_LABEL: "1",
                    WORKER_LABEL: self.worker,
                    HOST_LABEL: self.host,
                    DEPLOYMENT_LABEL: self.deployment,
                },
                network_disabled=True,
            )
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, f"create a reader of {image}") from exc
        container_id = str(created["Id"])
        try:
            stream, _ = self.api.get_archive(container_id, path)
            written = 0
            for chunk in stream:
                written += len(chunk)
                if written > max_bytes:
                    raise PathTooLarge(f"{path} in {image} is over {max_bytes >> 20} MiB")
                into.write(chunk)
            return True
        except NotFound:
            return False
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, f"read {path} out of {image}") from exc
        finally:
            self._remove_container(container_id)

    def image_info(self, image: str) -> dict[str, Any] | None:
        """The engine's inspect of a local image; None when it is not on this host."""
        try:
            return dict(self.api.inspect_image(image))
        except ImageNotFound:
            return None
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, f"inspect image {image}") from exc

    def _image_config(self, image: str) -> dict[str, Any] | None:
        """The image's `Config` (kept: a name's content changes only by a pull, which
        forgets it); None when the engine does not have the image (create says so)."""
        with self._lock:
            if image in self._configs:
                return self._configs[image]
        info = self.image_info(image)
        config = dict(info.get("Config") or {}) if info else None
        if config is not None:
            with self._lock:
                self._configs[image] = config
        return config

    def pull(self, image: str, *, timeout_s: float) -> None:
        """Pull a task image with the engine's client auth config (~/.docker/config.json),
        waiting at most `timeout_s`. docker-py's own `pull` waits forever (no read timeout),
        so the request is made here with one; a pull cut short is dropped by the engine
        when its request's connection closes."""
        repository, tag = docker.utils.parse_repository_tag(image)
        registry, _ = docker.auth.resolve_repository_name(repository)
        headers = {}
        header = docker.auth.get_config_header(self.api, registry)
        if header:
            headers["X-Registry-Auth"] = header
        params = {"fromImage": repository, "tag": tag or "latest"}
        outcome: list[BaseException | None] = []

        def run() -> None:
            try:
                response = self.api._post(
                    self.api._url("/images/create"),
                    params=params,
                    headers=headers,
                    stream=True,
                    timeout=timeout_s,
                )
                self.api._raise_for_status(response)
                for message in self.api._stream_helper(response, decode=True):
                    if isinstance(message, dict) and message.get("error"):
                        raise APIError(str(message["error"]))
                outcome.append(None)
            except BaseException as exc:  # handed to the waiting thread
                outcome.append(exc)

        thread = threading.Thread(target=run, name=f"pull {image}", daemon=True)
        thread.start()
        thread.join(timeout_s)
        with self._lock:
            self._digests.pop(image, None)
            self._configs.pop(image, None)
        if not outcome:
            raise PullFailed(f"pull {image}: no answer within {timeout_s:g} s")
        exc = outcome[0]
        if exc is None:
            return
        if isinstance(exc, APIError) and not_in_registry(exc):
            why = exc.explanation or exc
            raise ImageNotInRegistry(f"the registry has no image {image}: {why}") from exc
        if isinstance(exc, requests.exceptions.Timeout):
            raise PullFailed(f"pull {image}: no answer within {timeout_s:g} s") from exc
        if isinstance(exc, DockerException | requests.exceptions.RequestException):
            wrapped = wrap(exc, f"pull {image}")
            raise PullFailed(str(wrapped)) from exc
        raise exc

    def remove_image(self, image: str) -> bool:
        """Untag (and so free, if it was the last name) a local image; False when a
        container still uses it or it is gone already."""
        try:
            self.api.remove_image(image, force=False, noprune=False)
        except ImageNotFound:
            return False
        except APIError as exc:
            if exc.status_code == 409:  # a container uses it
                return False
            raise wrap(exc, f"remove image {image}") from exc
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, f"remove image {image}") from exc
        with self._lock:
            self._digests.pop(image, None)
            self._configs.pop(image, None)
        return True

    def images_in_use(self) -> set[str]:
        """The image ids of every container on this engine, running or not."""
        try:
            return {str(c["ImageID"]) for c in self.api.containers(all=True)}
        except (DockerException, requests.exceptions.RequestException) as exc:
            raise wrap(exc, "list containers") from exc
