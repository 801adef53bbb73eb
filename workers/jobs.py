"""The functions RQ runs — the only ones ever enqueued. Each takes an episode id.

A result is never dropped for Redis being away: writing it waits for Redis to come back
(a restart with its append-only file keeps everything else), so a restart while episodes
run costs time, not rewards. An episode runs only once its share of the host's budget is
reserved (workers/capacity.py); an interactive one keeps it until its finish.
"""

from __future__ import annotations

import logging
import time

from core.endings import infra_failure, task_error
from core.store import EpisodeRecord
from proctor.models import EpisodeMode, EpisodeResult
from workers import capacity, runtime
from workers.grading_tail import until_redis_answers, write_result
from workers.oneshot import run_oneshot
from workers.sandbox.engine import ImageNotInRegistry, SandboxError

log = logging.getLogger(__name__)


def finish(result: EpisodeResult, record: EpisodeRecord | None = None) -> bool:
    """Write a terminal result, however long Redis is away; False if it had ended first."""
    return write_result(runtime.current().store, result, record)


def run_episode(episode_id: str) -> str:
    """Run an episode to its end and write the result; returns the final status."""
    rt = runtime.current()
    rt.busy.add(episode_id)
    try:
        return _run_episode(rt, episode_id)
    finally:
        rt.busy.discard(episode_id)


def _run_episode(rt: runtime.Runtime, episode_id: str) -> str:
    record = until_redis_answers(f"episode {episode_id}: reading", lambda: rt.store.get(episode_id))
    if record is None:
        log.warning("episode %s: no record (expired?); skipping", episode_id)
        return "missing"
    if record.status.terminal:
        return record.status.value
    try:
        result = _reserved_run(rt, record)
    except ImageNotInRegistry as exc:
        log.warning("episode %s: task error: %s", episode_id, exc)
        result = task_error(record, str(exc))
    except SandboxError as exc:
        log.error("episode %s: infrastructure error: %s", episode_id, exc)
        result = infra_failure(record, str(exc))
    except Exception as exc:  # a bug of ours: still an ended episode, never a 0 reward
        log.exception("episode %s: internal error", episode_id)
        result = infra_failure(record, f"internal error: {type(exc).__name__}: {exc}")
    finally:
        if episode_id not in rt.holding:  # an interactive sandbox keeps its share
            capacity.release(rt.store, rt.host, episode_id)
    if result is None:
        return "skipped"
    if not finish(result, record):
        log.info("episode %s ended elsewhere first (cancelled or swept)", episode_id)
    return result.status.value


def _reserved_run(rt: runtime.Runtime, record: EpisodeRecord) -> EpisodeResult | None:
    """Start a one-shot episode once its share of the host's budget is ours (None: it
    ended meanwhile). Interactive episodes take no share: an open one mostly waits for its
    agent, and holding a share while idle would cap a host at a handful of open episodes
    and leave the processes that must serve their actions waiting for budget."""
    if record.request.mode is EpisodeMode.oneshot:
        # a task image by reference is pulled before the share is taken: a pull holds no
        # CPU or memory of the host's budget, and may take minutes
        rt.image_for(record.request.task)
        budget = capacity.HostBudget.of(rt.settings)
        if not until_redis_answers(
            f"episode {record.id}: reserving",
            lambda: capacity.reserve(
                rt.store, record, settings=rt.settings, budget=budget, worker=rt.worker
            ),
        ):
            return None
        return run_oneshot(rt, record)
    from workers.interactive import start_interactive

    return start_interactive(rt, record)


def run_action(
    episode_id: str, action: dict[str, object], reply_key: str, start_by: float | None = None
) -> None:
    """One interactive action (runs on the host that holds the episode's container), if it
    can start by `start_by`: later, it could end after the API stopped awaiting its reply,
    and a client retrying that 503 would have it run twice; it is refused at once."""
    from workers.interactive import run_action as act

    rt = runtime.current()
    if start_by is not None and time.time() > start_by:
        log.warning("episode %s: an action waited past its start-by time; not run", episode_id)
        rt.store.reply(
            reply_key, status=503, message="no worker took the action in time; it did not run"
        )
        return
    try:
        act(rt, episode_id, action, reply_key)
    except SandboxError as exc:
        log.error("episode %s: action failed in our infrastructure: %s", episode_id, exc)
        rt.store.reply(reply_key, status=503, message=f"the sandbox failed: {exc}")
    except Exception as exc:
        log.exception("episode %s: internal error in an action", episode_id)
        rt.store.reply(
            reply_key, status=500, message=f"internal error: {type(exc).__name__}: {exc}"
        )


def finish_episode(episode_id: str, reply_key: str | None = None) -> None:
    """Grade an interactive episode (on the host that holds its container)."""
    from workers.interactive import finish_interactive

    rt = runtime.current()
    rt.busy.add(episode_id)
    try:
        finish_interactive(rt, episode_id, reply_key)
    except Exception as exc:
        log.exception("episode %s: finishing failed", episode_id)
        record = until_redis_answers(
            f"episode {episode_id}: reading", lambda: rt.store.get(episode_id)
        )
        if record is not None:
            finish(infra_failure(record, f"finishing failed: {exc}"), record)
        if reply_key:
            rt.store.reply(
                reply_key, status=500, message=f"finishing failed: {type(exc).__name__}: {exc}"
            )
    finally:
        status = rt.store.status(episode_id)
        if status is None or status.terminal:  # a finish refused (409) leaves it running
            capacity.release(rt.store, rt.host, episode_id)
        rt.busy.discard(episode_id)


def prefetch_images(prefetch_id: str) -> None:
    """Pull a prefetch's images on this host (a job of the host's own queue)."""
    from workers.prefetch import prefetch_on_host

    prefetch_on_host(runtime.current(), prefetch_id)
