"""The engine's errors: all infrastructure, never the code under test's fault (an episode
that meets one gets `infra_error` and no reward).

    SandboxError            our infrastructure failed
    ├── DockerUnavailable   the engine does not answer
    ├── ImageMissing        the image is not on this host (names are never pulled)
    ├── PullFailed          the registry or the engine failed a task image's pull, or it
    │                       outlasted its bound (`pull`)
    ├── PathTooLarge        a path read out of an image is over the size asked for (the
    │                       task's, not ours: `workers/repos.py` says so in the result)
    ├── ProtectionMissing   the engine would run a sandbox without a required protection
    ├── NetworkGone         a spare sandbox network or network holder went meanwhile
    │                       (`Engine.create` makes a fresh one and goes on)
    ├── ExecStreamBroken    an exec's stream broke: the engine's fault, unless the process
    │                       in the sandbox died early (`Sandbox` asks the engine which)
    ├── ContainerStopped    an exec into a sandbox that is not running: why it stopped
    │                       (`Engine.usage`) is the evidence
    └── NoCapacity          the host's budget stayed full for as long as an episode may
                            wait (raised by workers/capacity.py)

ImageNotInRegistry (not a SandboxError: the task's fault) says the registry answered that
a task image reference does not exist.

`wrap` and `exec_failed` turn the SDK's errors into these, `not_in_registry` tells a pull's
missing image from a failing registry."""

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


class PullFailed(SandboxError):
    pass


class ImageNotInRegistry(Exception):
    """The registry says a task image reference does not exist: the task's fault, not ours."""


class NetworkGone(SandboxError):
    """A spare sandbox network or network holder was removed meanwhile (pruned by another
    worker, or stopped by an engine restart)."""


class ExecStreamBroken(SandboxError):
    pass


class PathTooLarge(SandboxError):
    """A path read out of an image is over the size asked for (the task's, not ours:
    `workers/repos.py` says so in the episode's result)."""


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


def not_in_registry(exc: APIError) -> bool:
    """Whether a pull's error is the registry saying the image does not exist (a 404, or
    the same said in the pull's stream), rather than the registry or engine failing."""
    if exc.status_code == 404:
        return True
    text = str(exc.explanation or exc).lower()
    return "manifest unknown" in text or "name unknown" in text


def exec_failed(exc: Exception, container_id: str) -> SandboxError:
    what = f"exec in {container_id[:12]}"
    # 409 when the exec is created in a stopped container; 500 when it stopped (its init
    # OOM-killed, say) between the exec's creation and its start
    if isinstance(exc, APIError) and exc.status_code in (409, 500) and "not running" in str(exc):
        return ContainerStopped(f"{what}: {exc.explanation}")
    return wrap(exc, what)
