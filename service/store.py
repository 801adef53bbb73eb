"""Episode records in Redis: the one source of truth for status and results.

API processes and workers share this module. Every state change goes through a Lua script,
so a terminal state is written exactly once — whoever gets there first (the worker with a
result, the janitor with an abandoned episode, the API with a cancel) wins, and the others
see `False` and discard their outcome. The same script counts verdicts and latencies, so
`/metrics` is the same on every API replica however many workers there are.

Keys (all under `proctor:`):
    episode:{id}        hash: request, status, result, created, queued_at, worker, host, container
    active              zset of non-terminal episode ids, scored by creation time
    events              pub/sub channel: an episode id each time one reaches a terminal state
    stats:verdict       hash: verdict → count
    stats:latency:{m}   hash: histogram buckets (le=…), sum, count, for m in total/queued/run
    workers             zset: worker name → last heartbeat (unix time)
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis

from proctor.models import EpisodeCreate, EpisodeMode, EpisodeResult, EpisodeStatus, Step

PREFIX = "proctor:"
EVENTS_CHANNEL = PREFIX + "events"
ACTIVE = PREFIX + "active"
WORKERS = PREFIX + "workers"
WORKER_PROBLEMS = PREFIX + "worker-problems"
COUNTERS = PREFIX + "stats:counters"
REPLY_TTL_S = 300
VERDICT_STATS = PREFIX + "stats:verdict"
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
LATENCY_METRICS = ("total", "queued", "run", "sandbox_start")
TERMINAL = tuple(s.value for s in EpisodeStatus if s.terminal)


def episode_key(episode_id: str) -> str:
    return f"{PREFIX}episode:{episode_id}"


def steps_key(episode_id: str) -> str:
    return f"{PREFIX}steps:{episode_id}"


def reply_key(token: str) -> str:
    """Where a worker pushes its answer to one request (the API blocks on it)."""
    return f"{PREFIX}reply:{token}"


def latency_key(metric: str) -> str:
    return f"{PREFIX}stats:latency:{metric}"


def new_episode_id() -> str:
    return "ep_" + uuid.uuid4().hex


# KEYS: episode, active, verdict stats, latency keys (total, queued, run, sandbox_start)
# ARGV: id, status, result json, verdict, ttl, then per latency metric: value or "" (4 values)
_FINISH = """
local cur = redis.call('HGET', KEYS[1], 'status')
if not cur then return -1 end
if cur == 'completed' or cur == 'failed' or cur == 'cancelled' then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'result', ARGV[3], 'finished', ARGV[10])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[3], ARGV[4], 1)
local buckets = cjson.decode(ARGV[11])
for i = 1, 4 do
  local v = ARGV[5 + i]
  if v ~= '' then
    local x = tonumber(v)
    local key = KEYS[3 + i]
    redis.call('HINCRBYFLOAT', key, 'sum', x)
    redis.call('HINCRBY', key, 'count', 1)
    for _, le in ipairs(buckets) do
      if x <= le then redis.call('HINCRBY', key, 'le=' .. le, 1) end
    end
  end
end
redis.call('PUBLISH', KEYS[8], ARGV[1])
return 1
"""

# Move a live episode forward (queued → starting → running → evaluating) unless it ended.
_ADVANCE = """
local cur = redis.call('HGET', KEYS[1], 'status')
if not cur then return -1 end
if cur == 'completed' or cur == 'failed' or cur == 'cancelled' then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1])
for i = 2, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('PUBLISH', KEYS[2], string.sub(KEYS[1], 17))
return 1
"""


SUMMARY_FIELDS = ("status", "worker", "mode", "created", "last_action")


@dataclass(frozen=True, slots=True)
class EpisodeSummary:
    id: str
    status: EpisodeStatus
    worker: str | None
    interactive: bool
    created: float
    last_action: float


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    id: str
    status: EpisodeStatus
    request: EpisodeCreate
    created: float
    fields: dict[str, str]
    result: EpisodeResult | None

    def public(self) -> EpisodeResult:
        """What GET /v1/episodes/{id} shows: the result when there is one, else the status."""
        if self.result is not None:
            return self.result
        return EpisodeResult(
            id=self.id,
            status=self.status,
            mode=self.request.mode,
            metadata=self.request.metadata,
            created_at=datetime.fromtimestamp(self.created, UTC),
        )


class EpisodeStore:
    """Typed access to episode records; one instance per process, sharing its Redis client."""

    def __init__(self, client: redis.Redis, *, result_ttl_s: int = 24 * 3600) -> None:
        self.redis = client
        self.result_ttl_s = result_ttl_s
        self._finish = client.register_script(_FINISH)
        self._advance = client.register_script(_ADVANCE)

    # ------------------------------------------------------------------ writing

    def create_fields(self, request: EpisodeCreate) -> dict[str, str]:
        now = time.time()
        return {
            "request": request.model_dump_json(),
            "status": EpisodeStatus.queued.value,
            "created": repr(now),
            "mode": request.mode.value,
        }

    def add(self, pipe: Any, episode_id: str, request: EpisodeCreate) -> None:
        """Queue the record's creation on a pipeline (the caller enqueues the job beside it)."""
        key = episode_key(episode_id)
        fields = self.create_fields(request)
        pipe.hset(key, mapping=fields)
        # a live episode must outlive its longest possible run; the finish script shortens it
        pipe.expire(key, self.result_ttl_s + 2 * 3600 + int(request.task.limits.timeout_s))
        pipe.zadd(ACTIVE, {episode_id: float(fields["created"])})

    def advance(self, episode_id: str, status: EpisodeStatus, **fields: str) -> bool:
        args: list[str] = [status.value]
        for name, value in fields.items():
            args += [name, value]
        return int(self._advance(keys=[episode_key(episode_id), EVENTS_CHANNEL], args=args)) == 1

    def finish(self, result: EpisodeResult) -> bool:
        """Write the terminal result; False when the episode had already ended (or is gone)."""
        assert result.status.terminal, result.status
        verdict = result.verdict.value if result.verdict else "none"
        timings = result.timings
        values = [timings.total_s, timings.queued_s, timings.run_s, timings.sandbox_start_s]
        finished = result.finished_at or datetime.now(UTC)
        result = result.model_copy(update={"finished_at": finished})
        keys = [episode_key(result.id), ACTIVE, VERDICT_STATS]
        keys += [latency_key(m) for m in LATENCY_METRICS] + [EVENTS_CHANNEL]
        args: list[Any] = [result.id, result.status.value, result.model_dump_json(), verdict]
        args += [self.result_ttl_s]
        args += ["" if v is None else repr(float(v)) for v in values]
        args += [repr(finished.timestamp()), json.dumps(list(LATENCY_BUCKETS))]
        return int(self._finish(keys=keys, args=args)) == 1

    # ------------------------------------------------------------------ interactive steps

    def add_step(self, episode_id: str, step: Step) -> Step:
        """Number the step and append it; actions of one episode are serialized upstream."""
        number = int(self.redis.hincrby(episode_key(episode_id), "steps", 1))
        step = step.model_copy(update={"step": number})
        pipe = self.redis.pipeline(transaction=False)
        pipe.rpush(steps_key(episode_id), step.model_dump_json())
        pipe.expire(steps_key(episode_id), self.result_ttl_s + 24 * 3600)
        pipe.execute()
        return step

    def steps(self, episode_id: str, *, last: int | None = None) -> list[Step]:
        start = -last if last else 0
        return [Step.model_validate_json(raw)
                for raw in self.redis.lrange(steps_key(episode_id), start, -1)]

    def reply(self, key: str, *, status: int = 200, body: Any = None,
              message: str | None = None) -> None:
        """Answer a request the API is blocking on (see `reply_key`)."""
        payload = json.dumps({"status": status, "body": body, "message": message})
        pipe = self.redis.pipeline()
        pipe.rpush(key, payload)
        pipe.expire(key, REPLY_TTL_S)
        pipe.execute()

    # ------------------------------------------------------------------ reading

    def get(self, episode_id: str) -> EpisodeRecord | None:
        raw = self.redis.hgetall(episode_key(episode_id))
        return _record(episode_id, raw) if raw else None

    def get_many(self, episode_ids: Sequence[str]) -> list[EpisodeRecord | None]:
        pipe = self.redis.pipeline(transaction=False)
        for episode_id in episode_ids:
            pipe.hgetall(episode_key(episode_id))
        return [
            _record(eid, raw) if raw else None
            for eid, raw in zip(episode_ids, pipe.execute(), strict=True)
        ]

    def live_summaries(self) -> list[EpisodeSummary]:
        """The started, non-terminal episodes, without their (possibly large) requests:
        what the janitors scan every few seconds."""
        ids = self.active_ids()
        pipe = self.redis.pipeline(transaction=False)
        for episode_id in ids:
            pipe.hmget(episode_key(episode_id), *SUMMARY_FIELDS)
        summaries = []
        for episode_id, values in zip(ids, pipe.execute(), strict=True):
            status, worker, mode, created, last_action = (
                _text(v) if v is not None else None for v in values)
            if status is None or status in TERMINAL or status == EpisodeStatus.queued.value:
                continue
            summaries.append(EpisodeSummary(
                id=episode_id, status=EpisodeStatus(status), worker=worker,
                interactive=mode == EpisodeMode.interactive.value,
                created=float(created or 0), last_action=float(last_action or created or 0)))
        return summaries

    def status(self, episode_id: str) -> EpisodeStatus | None:
        raw = self.redis.hget(episode_key(episode_id), "status")
        return EpisodeStatus(_text(raw)) if raw else None

    def active_ids(self) -> list[str]:
        return [_text(x) for x in self.redis.zrange(ACTIVE, 0, -1)]

    # ------------------------------------------------------------------ workers

    def heartbeat(self, worker: str, *, host: str) -> None:
        pipe = self.redis.pipeline(transaction=False)
        pipe.zadd(WORKERS, {worker: time.time()})
        pipe.hset(PREFIX + "worker-hosts", worker, host)
        pipe.execute()

    def forget_worker(self, worker: str) -> None:
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrem(WORKERS, worker)
        pipe.hdel(PREFIX + "worker-hosts", worker)
        pipe.hdel(WORKER_PROBLEMS, worker)
        pipe.execute()

    def forget_workers_older_than(self, age_s: float) -> None:
        for worker in self.redis.zrangebyscore(WORKERS, "-inf", time.time() - age_s):
            self.forget_worker(_text(worker))

    def report_problem(self, worker: str, problem: str | None) -> None:
        """A worker that is alive but cannot run episodes (Docker down, image missing)."""
        if problem:
            self.redis.hset(WORKER_PROBLEMS, worker, problem)
        else:
            self.redis.hdel(WORKER_PROBLEMS, worker)

    def worker_problems(self, workers: Sequence[str]) -> dict[str, str]:
        if not workers:
            return {}
        values = self.redis.hmget(WORKER_PROBLEMS, list(workers))
        return {w: _text(v) for w, v in zip(workers, values, strict=True) if v}

    def worker_host(self, worker: str) -> str | None:
        host = self.redis.hget(PREFIX + "worker-hosts", worker)
        return _text(host) if host else None

    def live_workers(self, ttl_s: float) -> list[str]:
        return [_text(x) for x in self.redis.zrangebyscore(WORKERS, time.time() - ttl_s, "+inf")]

    def dead_workers(self, ttl_s: float) -> list[str]:
        return [_text(x) for x in self.redis.zrangebyscore(WORKERS, "-inf", time.time() - ttl_s)]

    def stats(self) -> tuple[dict[str, int], dict[str, dict[str, float]]]:
        pipe = self.redis.pipeline(transaction=False)
        pipe.hgetall(VERDICT_STATS)
        for metric in LATENCY_METRICS:
            pipe.hgetall(latency_key(metric))
        verdicts, *latencies = pipe.execute()
        return (
            {_text(k): int(v) for k, v in verdicts.items()},
            {
                m: {_text(k): float(v) for k, v in raw.items()}
                for m, raw in zip(LATENCY_METRICS, latencies, strict=True)
            },
        )

    # ------------------------------------------------------------------ other counters

    def count(self, name: str, amount: float = 1.0, **labels: str) -> None:
        """Count an event in Redis (e.g. judge calls by outcome), visible on every replica."""
        field = json.dumps([name, sorted(labels.items())])
        self.redis.hincrbyfloat(COUNTERS, field, amount)

    def extra_metrics(self) -> list[Any]:
        from prometheus_client.core import CounterMetricFamily

        families: dict[str, Any] = {}
        for field, value in self.redis.hgetall(COUNTERS).items():
            name, labels = json.loads(_text(field))
            keys = tuple(k for k, _ in labels)
            family = families.get(name)
            if family is None:
                family = families[name] = CounterMetricFamily(name, name, labels=keys)
            family.add_metric([v for _, v in labels], float(value))
        return list(families.values())


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _record(episode_id: str, raw: dict[Any, Any]) -> EpisodeRecord | None:
    fields = {_text(k): _text(v) for k, v in raw.items()}
    if "request" not in fields:  # a record being created or already half-expired
        return None
    result = fields.pop("result", None)
    return EpisodeRecord(
        id=episode_id,
        status=EpisodeStatus(fields["status"]),
        request=EpisodeCreate.model_validate_json(fields.pop("request")),
        created=float(fields.get("created", "0")),
        fields=fields,
        result=EpisodeResult.model_validate_json(result) if result else None,
    )
