"""The functions RQ runs — the only ones ever enqueued. Each takes an episode id."""

from __future__ import annotations

import logging

from proctor.models import EpisodeMode
from workers import runtime
from workers.oneshot import infra_failure, run_oneshot
from workers.sandbox.docker import SandboxError

log = logging.getLogger(__name__)


def run_episode(episode_id: str) -> str:
    """Run an episode to its end and write the result; returns the final status."""
    rt = runtime.current()
    record = rt.store.get(episode_id)
    if record is None:
        log.warning("episode %s: no record (expired?); skipping", episode_id)
        return "missing"
    if record.status.terminal:
        return record.status.value
    try:
        if record.request.mode is EpisodeMode.oneshot:
            result = run_oneshot(rt, record)
        else:
            from workers.interactive import start_interactive

            result = start_interactive(rt, record)
    except SandboxError as exc:
        log.error("episode %s: infrastructure error: %s", episode_id, exc)
        result = infra_failure(record, str(exc))
    except Exception as exc:  # a bug of ours: still an ended episode, never a 0 reward
        log.exception("episode %s: internal error", episode_id)
        result = infra_failure(record, f"internal error: {type(exc).__name__}: {exc}")
    if result is None:
        return "skipped"
    if not rt.store.finish(result):
        log.info("episode %s ended elsewhere first (cancelled or swept)", episode_id)
    return result.status.value
