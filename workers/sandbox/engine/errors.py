"""The engine's errors: all infrastructure, never the code under test's fault (an episode
that meets one gets `infra_error` and no reward).

    SandboxError            our infrastructure failed
    ├── DockerUnavailable   the engine does not answer
    ├── ImageMissing        the image is not on this host (we never pull at run time)
    ├── ProtectionMissing   the engine would run a sandbox without a required protection
    ├── NetworkGone         a spare sandbox network or network holder went meanwhile
    │                       (`Engine.create` makes a fresh one and goes on)
    ├── ExecStreamBroken    an exec's stream broke: the engine's fault, unless the process
    │                       in the sandbox died early (`Sandbox` asks the engine which)
    ├── ContainerStopped    an exec into a sandbox that is not running: why it stopped
    │                       (`Engine.usage`) is the evidence
    └── NoCapacity          the host's budget stayed full for as long as an episode may
                            wait (raised by workers/capacity.py)

`wrap` and `exec_failed` turn the SDK's errors into these."""

from __future__ import annotations

import requests
from docker.errors import APIError, ImageNotFound


class SandboxError(Exception):
    """Our infrastructure failed; the episode gets `infra_error`, never a 0 reward."""


class DockerUnavailable(SandboxError):
    pass


class ImageMissing(SandboxError):
    pass


class ProtectionMissing(SandboxError):
    pass


class NetworkGone(SandboxError):
    """A spare sandbox network or network holder was removed meanwhile (pruned by another
    worker, or stopped by an engine restart)."""


class ExecStreamBroken(SandboxError):
    pass


class NoCapacity(SandboxError):
    """The host's budget stayed full for as long as an episode may wait: our failure."""


class ContainerStopped(SandboxError):
    """An exec into a sandbox that is not running (409): why it stopped is the evidence
    (its init killed for lack of memory, most often), read with `Engine.usage`."""


def wrap(exc: Exception, what: str) -> SandboxError:
    if isinstance(exc, ImageNotFound):
        return ImageMissing(f"{what}: image not found ({exc.explanation})")
    if isinstance(exc, requests.exceptions.ConnectionError | FileNotFoundError):
        return DockerUnavailable(f"{what}: the Docker engine does not answer ({exc})")
    return SandboxError(f"{what}: {exc}")


def exec_failed(exc: Exception, container_id: str) -> SandboxError:
    what = f"exec in {container_id[:12]}"
    # 409 when the exec is created in a stopped container; 500 when it stopped (its init
    # OOM-killed, say) between the exec's creation and its start
    if isinstance(exc, APIError) and exc.status_code in (409, 500) and "not running" in str(exc):
        return ContainerStopped(f"{what}: {exc.explanation}")
    return wrap(exc, what)
