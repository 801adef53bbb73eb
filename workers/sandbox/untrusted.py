"""What a sandbox takes of its image's configuration: an image is data, never trusted code.

A task image by reference is whoever built it's: its configuration must not run anything,
write anywhere, or pass for one of our containers. The sandbox's own settings already
replace its user (root keeper, execs as the sandbox uid), working directory, command and
network; what the engine would still merge in from the image is overridden here:

| the image's        | in a sandbox                                                          |
|--------------------|-----------------------------------------------------------------------|
| ENTRYPOINT, CMD    | replaced: the container runs our argv only                            |
| HEALTHCHECK        | disabled (it would run the image's command as the container's user)   |
| VOLUME             | an empty read-only tmpfs over each path: no writable disk beside ours |
| ENV loader hooks   | LD_PRELOAD, LD_AUDIT, BASH_ENV, ENV, PYTHON{PATH,HOME,STARTUP,INSPECT} |
|                    | set empty (both loaders treat an empty value as unset); the rest kept |
| LABEL org.proctor.* | ours set empty (so no image passes for a holder, pool or deployment) |

Setuid binaries are inert already (no-new-privileges, no capabilities); the read-only root
and the runner streamed in over stdin are the same for every image.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

LABEL_PREFIX = "org.proctor."
HOOK_VARIABLES = frozenset(
    {
        "LD_PRELOAD",
        "LD_AUDIT",
        "BASH_ENV",
        "ENV",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "PYTHONINSPECT",
        "PYTHONUSERBASE",
    }
)
VOLUME_TMPFS = "ro,nosuid,nodev,noexec,size=4k,mode=0555"
NO_HEALTHCHECK = {"test": ["NONE"]}


@dataclass(frozen=True, slots=True)
class Overrides:
    environment: dict[str, str] = field(default_factory=dict)
    tmpfs: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


def overrides(config: Mapping[str, Any] | None, *, ours: Collection[str]) -> Overrides:
    """What to set on a sandbox over an image whose `Config` (the engine's inspect) this is;
    `ours` are the tmpfs mounts the sandbox has already (their paths are left alone)."""
    if not config:
        return Overrides()
    environment = {}
    for entry in config.get("Env") or []:
        name = str(entry).partition("=")[0]
        if name in HOOK_VARIABLES:
            environment[name] = ""
    tmpfs = {
        path: VOLUME_TMPFS
        for path in sorted(config.get("Volumes") or {})
        if path.rstrip("/") and path.rstrip("/") not in ours
    }
    labels = {key: "" for key in (config.get("Labels") or {}) if str(key).startswith(LABEL_PREFIX)}
    return Overrides(environment=environment, tmpfs=tmpfs, labels=labels)
