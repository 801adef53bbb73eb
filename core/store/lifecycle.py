"""An episode's way forward once created: advanced by its worker (`ADVANCE`), its sandbox
started, its actions noted, and its end written exactly once (`FINISH`): whoever gets there
first (the worker with a result, the janitor with an abandoned episode, the API with a
cancel) wins, and the others see `False` and discard their outcome."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime

import redis

from core import keys
from core.sink import EpisodeSink
from core.store.catalog_index import CATALOG_LUA, CatalogEntry, catalog_terms, latency_bucket
from core.store.counters import LATENCY_FIELDS, LATENCY_METRICS, STATS_LUA
from core.store.encoding import storable
from core.store.pace import BUSY_LUA, CONSTANTS_LUA, DRAIN_LUA, WAITED_LUA
from core.store.records import RecordField, SandboxState
from core.store.scripts import BoundScript, LuaScript
from proctor.models import EpisodeCreate, EpisodeResult, EpisodeStatus

# Move a live episode forward (queued → starting → running → evaluating) unless it ended.
# Only what a wait waits for is published: an interactive episode's sandbox being ready
# (running); the end is published by `FINISH`. ARG.fields: field, value pairs to set.
ADVANCE = LuaScript(
    name="advance",
    keys=("episode", "events", "queued", "pace"),
    args=("id", "status"),
    rest_args="fields",
    statuses=True,
    constants=CONSTANTS_LUA,
    body="""
local cur = redis.call('HGET', KEY.episode, 'status')
if not cur then return -1 end
if TERMINAL[cur] then return 0 end
local id = ARG.id
-- the status and the fields, in one HSET
redis.call('HSET', KEY.episode, 'status', ARG.status, unpack(ARG.fields))
if ARG.status ~= QUEUED and redis.call('ZREM', KEY.queued, id) == 1 then
"""
    + WAITED_LUA
    + """
  if redis.call('ZCARD', KEY.queued) == 0 then
    -- the queue ran dry: until the next end, workers may idle, so that gap is no drain
    redis.call('HSET', KEY.pace, 'waiting', 0)
  end
end
if ARG.status == RUNNING and redis.call('HGET', KEY.episode, 'mode') == INTERACTIVE then
  redis.call('PUBLISH', KEY.events, id)
end
return 1
""",
)

# The finish script's first job: write the end, unless the episode ended already (0) or is
# gone (-1); the episode leaves the live sets.
END_RECORD_LUA = """
local cur = redis.call('HGET', KEY.episode, 'status')
if not cur then return -1 end
if TERMINAL[cur] then return 0 end
redis.call('HSET', KEY.episode, 'status', ARG.status, 'result', ARG.result,
           'finished', ARG.finished, 'summary', ARG.summary)
redis.call('EXPIRE', KEY.episode, tonumber(ARG.ttl))
redis.call('ZREM', KEY.active, ARG.id)
redis.call('ZREM', KEY.queued, ARG.id)
"""

# … and its last: tell the waits (`events`).
PUBLISH_END_LUA = """
redis.call('PUBLISH', KEY.events, ARG.id)
return 1
"""

# End an episode and account for it in one atomic call, five jobs in this order: the end
# (END_RECORD_LUA), the pace (BUSY_LUA) and the drain rate (DRAIN_LUA) the
# admission script reads, the verdict and latency stats /metrics reads
# (counters.STATS_LUA), and the catalog index (catalog_index.CATALOG_LUA); then the end is
# published. → 1 written, 0 it had ended, -1 no record.
FINISH = LuaScript(
    name="finish",
    keys=(
        "episode",
        "active",
        "verdicts",
        *(f"latency_{m}" for m in LATENCY_METRICS),
        "events",
        "queued",
        "pace",
        "minute",
        "rules",
        "categories",
    ),
    args=(
        "id",
        "status",
        "result",
        "verdict",
        "ttl",
        *(f"{m}_s" for m in LATENCY_METRICS),
        "finished",
        "buckets",
        "summary",
        "trim",
        "bucket",
        "rules",
        "categories",
    ),
    rest_keys="listed",
    statuses=True,
    constants=CONSTANTS_LUA,
    body=END_RECORD_LUA + BUSY_LUA + DRAIN_LUA + STATS_LUA + CATALOG_LUA + PUBLISH_END_LUA,
)


class EpisodeLifecycle:
    """Moving an episode forward and ending it (`EpisodeStore.advance`, `.finish`, …)."""

    redis: redis.Redis
    result_ttl_s: int
    sink: EpisodeSink | None
    _advance: BoundScript
    _finish: BoundScript

    def advance(
        self,
        episode_id: str,
        status: EpisodeStatus,
        *,
        worker: str | None = None,
        host: str | None = None,
        container: str | None = None,
    ) -> bool:
        """Move a live episode forward, noting who runs it; False when it had ended."""
        fields = {
            RecordField.worker: worker,
            RecordField.host: host,
            RecordField.container: container,
        }
        return self._advance_with(
            episode_id, status, {k: v for k, v in fields.items() if v is not None}
        )

    def start_sandbox(self, episode_id: str, state: SandboxState) -> bool:
        """An interactive episode's sandbox is ready: `running`, with its state."""
        fields = state.encode()
        fields[RecordField.last_action] = repr(time.time())
        return self._advance_with(episode_id, EpisodeStatus.running, fields)

    def touch(self, episode_id: str, *, at: float) -> None:
        """An interactive episode took an action (what its idle limit counts from)."""
        self.redis.hset(keys.episode(episode_id), RecordField.last_action, repr(at))

    def _advance_with(
        self, episode_id: str, status: EpisodeStatus, fields: Mapping[str, str]
    ) -> bool:
        rest: list[str] = []
        for name, value in fields.items():
            rest += [name, value]
        return (
            int(
                self._advance(
                    keys={
                        "episode": keys.episode(episode_id),
                        "events": keys.EVENTS,
                        "queued": keys.QUEUED,
                        "pace": keys.PACE,
                    },
                    args={"id": episode_id, "status": status.value},
                    rest_args=rest,
                )
            )
            == 1
        )

    def finish(self, result: EpisodeResult, *, request: EpisodeCreate | None = None) -> bool:
        """Write the terminal result; False when the episode had already ended (or is gone).

        `request`: the episode's, when the caller holds it (the sink then need not read it)."""
        assert result.status.terminal, result.status
        verdict = result.verdict.value if result.verdict else "none"
        timings = result.timings
        values = [timings.total_s, timings.queued_s, timings.run_s, timings.sandbox_start_s]
        finished = result.finished_at or datetime.now(UTC)
        result, stored_json = storable(result.model_copy(update={"finished_at": finished}))
        entry = CatalogEntry.of(result, finished=finished.timestamp())
        script_keys = {
            "episode": keys.episode(result.id),
            "active": keys.ACTIVE,
            "verdicts": keys.VERDICTS,
            **{f"latency_{m}": keys.latency(m) for m in LATENCY_METRICS},
            "events": keys.EVENTS,
            "queued": keys.QUEUED,
            "pace": keys.PACE,
            "minute": keys.catalog_minute(str(int(entry.finished // 60))),
            "rules": keys.CATALOG_RULES,
            "categories": keys.CATALOG_CATEGORIES,
        }
        listed = [keys.CATALOG, *(keys.catalog_term(t) for t in catalog_terms(result))]
        args = {
            "id": result.id,
            "status": result.status.value,
            "result": stored_json,
            "verdict": verdict,
            "ttl": self.result_ttl_s,
            **{
                f"{m}_s": "" if v is None else repr(float(v))
                for m, v in zip(LATENCY_METRICS, values, strict=True)
            },
            "finished": repr(entry.finished),
            "buckets": LATENCY_FIELDS,
            "summary": entry.encode(),
            "trim": repr(entry.finished - self.result_ttl_s),
            "bucket": latency_bucket(timings.total_s),
            "rules": json.dumps(list(entry.rules)),
            "categories": json.dumps(list(entry.categories)),
        }
        stored = int(self._finish(keys=script_keys, args=args, rest_keys=listed)) == 1
        if stored and self.sink is not None:
            raw = (
                request.model_dump_json()
                if request is not None
                else self.redis.hget(keys.episode(result.id), RecordField.request)
            )
            if raw is not None:
                self.sink.write(raw, stored_json)
        return stored
