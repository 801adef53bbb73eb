"""A real image registry for the tests: Debian's `docker-registry` on 127.0.0.1, a port and a
data directory of its own, started and stopped by PID; and a loopback proxy in front of it
that can be told to stall (a registry that answers slowly).

The engine takes plain HTTP from 127.0.0.0/8 registries (its default insecure range), so no
certificate is needed.
"""

from __future__ import annotations

import io
import shutil
import socket
import subprocess
import tarfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import docker
import httpx
import pytest

from tests.conftest import free_port, wait_until

REGISTRY = shutil.which("docker-registry") or "/usr/bin/docker-registry"
BASE = "proctor/sandbox-python:latest"
START_S = 30

CONFIG = """\
version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {root}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
"""
AUTH_CONFIG = """\
auth:
  htpasswd:
    realm: proctor-test
    path: {htpasswd}
"""
# a fixed user for registries that ask for credentials; the hash is bcrypt's (the only one
# the registry takes) of PASSWORD, made once with Python's crypt (METHOD_BLOWFISH)
USER = "proctor"
PASSWORD = "proctor-test-pw"
PASSWORD_HASH = "$2b$04$VP90S1jbuas2aEx4h/BaCOwmwbWgYWS0rm6rDukxlIDvUbZa8M0nq"


@dataclass(frozen=True)
class Registry:
    host: str  # host:port

    def ref(self, repository: str, tag: str = "latest") -> str:
        return f"{self.host}/{repository}:{tag}"


@contextmanager
def running_registry(tmp: Path, *, auth: bool = False) -> Iterator[Registry]:
    """A registry on a free port of 127.0.0.1; with `auth`, it takes only USER/PASSWORD."""
    if not Path(REGISTRY).exists():
        pytest.skip("docker-registry is not installed (make setup installs it)")
    port = free_port()
    root = tmp / "registry-data"
    root.mkdir()
    config = tmp / "registry.yml"
    text = CONFIG.format(root=root, port=port)
    if auth:
        htpasswd = tmp / "htpasswd"
        htpasswd.write_text(f"{USER}:{PASSWORD_HASH}\n")
        text += AUTH_CONFIG.format(htpasswd=htpasswd)
    config.write_text(text)
    log = (tmp / "registry.log").open("wb")
    process = subprocess.Popen([REGISTRY, "serve", str(config)], stdout=log, stderr=log)
    try:

        def answers() -> bool:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/v2/", timeout=1)
                return answer.status_code == (401 if auth else 200)
            except httpx.HTTPError:
                return False

        assert wait_until(answers, START_S), (tmp / "registry.log").read_text()[-2000:]
        yield Registry(host=f"127.0.0.1:{port}")
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def push(
    client: docker.DockerClient, image: str, ref: str, *, auth: dict[str, str] | None = None
) -> str:
    """Tag a local image as `ref`, push it, remove the local tag; the pushed digest."""
    repository, _, tag = ref.rpartition(":")
    client.images.get(image).tag(repository, tag)
    digest = ""
    try:
        lines = client.api.push(repository, tag=tag, stream=True, decode=True, auth_config=auth)
        for line in lines:
            if line.get("error"):
                raise RuntimeError(f"push {ref}: {line['error']}")
            aux = line.get("aux") or {}
            digest = aux.get("Digest", digest)
    finally:
        with suppress(docker.errors.ImageNotFound):
            client.api.remove_image(ref)
    return str(digest)


def build(client: docker.DockerClient, dockerfile: str, files: dict[str, bytes]) -> str:
    """Build an image from a Dockerfile and files (no network needed: FROM a local image)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in {"Dockerfile": dockerfile.encode(), **files}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    tag = f"proctor-test/imageref:{uuid.uuid4().hex[:10]}"
    buffer.seek(0)
    client.images.build(fileobj=buffer, custom_context=True, tag=tag, rm=True, pull=False)
    return tag


def small_image(client: docker.DockerClient, marker: str) -> str:
    """A local image from the sandbox image with one layer of its own (a distinct digest)."""
    return build(client, f"FROM {BASE}\nCOPY marker /marker\n", {"marker": marker.encode()})


class StallingProxy:
    """A loopback TCP proxy to the registry that, once told to stall, accepts connections and
    never answers them (the socket stays open: the engine waits on it)."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.partition(":")
        self.upstream = (host, int(port))
        self.stall = threading.Event()
        self._server = socket.socket()
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.host = f"127.0.0.1:{self._server.getsockname()[1]}"
        self._held: list[socket.socket] = []
        self._closed = False
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            if self.stall.is_set():
                self._held.append(conn)
                continue
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        with suppress(OSError), conn, socket.create_connection(self.upstream) as up:

            def pump(src: socket.socket, dst: socket.socket) -> None:
                with suppress(OSError):
                    while data := src.recv(65536):
                        dst.sendall(data)
                with suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)

            other = threading.Thread(target=pump, args=(up, conn), daemon=True)
            other.start()
            pump(conn, up)
            other.join(60)

    def close(self) -> None:
        self._closed = True
        with suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept
        self._server.close()
        self._acceptor.join(10)
        for conn in self._held:
            conn.close()


def wait_gone(client: docker.DockerClient, ref: str, timeout_s: float = 30) -> bool:
    def gone() -> bool:
        try:
            client.images.get(ref)
        except docker.errors.ImageNotFound:
            return True
        return False

    return wait_until(gone, timeout_s)


def now() -> float:
    return time.monotonic()
