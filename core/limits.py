"""What one episode may ask of a worker host: the deployment's maxima and the checks.

A request beyond the maxima is the caller's error: the API refuses it (422, see
`service/admission.py`) with the messages made here, each naming the maximum and its
setting. The maxima are settings (`PROCTOR_MAX_*`); those left unset are derived from the
machine the process runs on. Workers apply the same maxima to what they start
(`within_host`), in case the API runs on a larger machine than they do.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from functools import cache

from core import languages
from core.config import Settings
from core.defaults import DISK_SHARE, MEMORY_SHARE
from proctor.models import Action, BashAction, EpisodeCreate, EpisodeMode, Limits

log = logging.getLogger(__name__)


# read once per process: each read is a file the C library parses (/proc, /sys), and every
# episode asks (a machine's CPUs and memory do not change under a running process)
@cache
def host_memory_mb() -> int:
    """Physical memory of this machine, in MiB."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) >> 20


@cache
def host_cpus() -> int:
    """CPUs of this machine: what Docker measures a CPU quota against."""
    return os.cpu_count() or 1


@dataclass(frozen=True, slots=True)
class HostMaxima:
    """The most one episode may ask for. `episode_s` bounds each timeout and, for a
    one-shot episode, their sum (tests + setup + actions)."""

    memory_mb: int
    cpus: float
    pids: int
    disk_mb: int
    output_bytes: int
    episode_s: float

    @classmethod
    def of(cls, settings: Settings) -> HostMaxima:
        memory = host_memory_mb()
        least = Limits()  # what a task that sets no limits asks for is always admitted
        return cls(
            memory_mb=settings.max_memory_mb or max(int(memory * MEMORY_SHARE), least.memory_mb),
            cpus=settings.max_cpus or float(host_cpus()),
            pids=settings.max_pids,
            disk_mb=settings.max_disk_mb or max(int(memory * DISK_SHARE), least.disk_mb),
            output_bytes=settings.max_output_bytes,
            episode_s=settings.max_episode_s,
        )


def _shown(value: float) -> str:
    """A number as a person writes it: 2, 2.5, 1048576 (not 2.0 or 1.04858e+06)."""
    return str(int(value)) if float(value).is_integer() else str(value)


def oneshot_seconds(request: EpisodeCreate) -> float:
    """The longest a one-shot episode can run: every command it runs at its own timeout."""
    limits = request.task.limits
    actions = request.solution.actions if request.solution else []
    acting = sum(a.timeout_s for a in actions if isinstance(a, BashAction))
    language = request.task.language
    compiling = (
        limits.compile_timeout_s if language and languages.language(language).compiled else 0
    )
    judge = request.task.tests.judge
    testing = judge.run_seconds(limits.timeout_s) if judge is not None else limits.timeout_s
    return limits.timeout_s * len(request.task.setup) + testing + acting + compiling


def refusals(request: EpisodeCreate, maxima: HostMaxima) -> list[str]:
    """Every way `request` asks for more than `maxima` allow, each naming its maximum."""
    limits = request.task.limits
    over: list[str] = []

    def check(field: str, asked: float, most: float, setting: str, unit: str = "") -> None:
        if asked > most:
            over.append(
                f"{field} {_shown(asked)}{unit} is over this deployment's maximum "
                f"of {_shown(most)}{unit} ({setting})"
            )

    check("task.limits.memory_mb", limits.memory_mb, maxima.memory_mb, "PROCTOR_MAX_MEMORY_MB")
    check("task.limits.cpus", limits.cpus, maxima.cpus, "PROCTOR_MAX_CPUS")
    check("task.limits.pids", limits.pids, maxima.pids, "PROCTOR_MAX_PIDS")
    check("task.limits.disk_mb", limits.disk_mb, maxima.disk_mb, "PROCTOR_MAX_DISK_MB")
    check(
        "task.limits.output_bytes",
        limits.output_bytes,
        maxima.output_bytes,
        "PROCTOR_MAX_OUTPUT_BYTES",
    )
    sizes = len(over)
    check(
        "task.limits.timeout_s", limits.timeout_s, maxima.episode_s, "PROCTOR_MAX_EPISODE_S", " s"
    )
    actions = request.solution.actions if request.solution else []
    slow = [
        (i, a.timeout_s)
        for i, a in enumerate(actions)
        if isinstance(a, BashAction) and a.timeout_s > maxima.episode_s
    ]
    if slow:  # the first names the rest: 256 alike are one mistake, not 256 messages
        (i, asked), more = slow[0], len(slow) - 1
        check(
            f"solution.actions.{i}.timeout_s",
            asked,
            maxima.episode_s,
            "PROCTOR_MAX_EPISODE_S",
            " s",
        )
        if more:
            over[-1] += f", and so are {more} more actions"
    # a timeout already over alone says enough; the sum would repeat it
    if request.mode is EpisodeMode.oneshot and len(over) == sizes:
        total = round(oneshot_seconds(request), 6)  # 0.1 + 0.2 is not over 0.3
        if total > maxima.episode_s:
            over.append(
                f"the episode's timeouts add up to {_shown(total)} s (tests, each setup "
                f"command at limits.timeout_s, and every action), over this deployment's "
                f"maximum of {_shown(maxima.episode_s)} s (PROCTOR_MAX_EPISODE_S)"
            )
    return over


def action_refusal(action: Action, settings: Settings) -> str | None:
    """Why an interactive action asks for more than the episode's maximum (None: it does not)."""
    if isinstance(action, BashAction) and action.timeout_s > settings.max_episode_s:
        return (
            f"timeout_s {_shown(action.timeout_s)} s is over this deployment's "
            f"maximum of {_shown(settings.max_episode_s)} s (PROCTOR_MAX_EPISODE_S)"
        )
    return None


def within_host(limits: Limits, settings: Settings) -> Limits:
    """`limits` cut to what this worker's own host can give, and a warning when cut.

    Admission already refused anything over the maxima; this only bites when the API
    runs elsewhere with other maxima. Cutting keeps the episode a typed verdict (a sandbox
    that runs out of what it asked for ends as `oom` or `timeout`) instead of a Docker
    refusal that would read as our failure.
    """
    maxima = HostMaxima.of(settings)
    cut = {
        "memory_mb": min(limits.memory_mb, maxima.memory_mb, host_memory_mb()),
        "cpus": min(limits.cpus, maxima.cpus, float(host_cpus())),
        "pids": min(limits.pids, maxima.pids),
        "disk_mb": min(limits.disk_mb, maxima.disk_mb),
        "output_bytes": min(limits.output_bytes, maxima.output_bytes),
        "timeout_s": min(limits.timeout_s, maxima.episode_s),
    }
    changed = {k: v for k, v in cut.items() if getattr(limits, k) != v}
    if not changed:
        return limits
    log.warning(
        "limits cut to this worker host's maxima: %s",
        ", ".join(f"{k} {getattr(limits, k)} -> {v}" for k, v in changed.items()),
    )
    return limits.model_copy(update=changed)
