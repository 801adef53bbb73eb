"""Episode records in Redis: the one source of truth for status and results.

API processes and workers share this module. Every state change goes through a Lua script,
so a terminal state is written exactly once — whoever gets there first (the worker with a
result, the janitor with an abandoned episode, the API with a cancel) wins, and the others
see `False` and discard their outcome. The same script counts verdicts and latencies, so
`/metrics` is the same on every API replica however many workers there are.

Keys (all under `proctor:`):
    episode:{id}        hash: request, status, result, created, queued_at, worker, host, container
    active              zset of non-terminal episode ids, scored by creation time
    queued              zset of the episode ids not yet started, scored by creation time:
                        the queue bound counts these (written with the record, atomically)
    events              pub/sub channel: an episode id each time one reaches a terminal state
    stats:verdict       hash: verdict → count
    stats:latency:{m}   hash: histogram buckets (le=…), sum, count, for m in total/queued/run
    workers             zset: worker name → last heartbeat (unix time)
    worker-images       hash: worker name → JSON {image name: null (runnable) or why not}
    reply:{token}       list: a worker's answer to one request the API blocks on
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis
import redis.asyncio as aioredis

from proctor.models import EpisodeCreate, EpisodeMode, EpisodeResult, EpisodeStatus, Step

PREFIX = "proctor:"
EVENTS_CHANNEL = PREFIX + "events"
ACTIVE = PREFIX + "active"
QUEUED = PREFIX + "queued"
WORKERS = PREFIX + "workers"
WORKER_PROBLEMS = PREFIX + "worker-problems"
WORKER_IMAGES = PREFIX + "worker-images"
COUNTERS = PREFIX + "stats:counters"
REPLY_TTL_S = 300
# a blocking read's socket outlives the wait it asked Redis for by this much
BLOCKING_SOCKET_MARGIN_S = 15.0
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


# KEYS: episode, active, verdict stats, latency keys (total, queued, run, sandbox_start),
# events, queued
# ARGV: id, status, result json, verdict, ttl, then per latency metric: value or "" (4 values)
_FINISH = """
local cur = redis.call('HGET', KEYS[1], 'status')
if not cur then return -1 end
if cur == 'completed' or cur == 'failed' or cur == 'cancelled' then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'result', ARGV[3], 'finished', ARGV[10])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[9], ARGV[1])
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
# KEYS: episode, events, queued
_ADVANCE = """
local cur = redis.call('HGET', KEYS[1], 'status')
if not cur then return -1 end
if cur == 'completed' or cur == 'failed' or cur == 'cancelled' then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1])
for i = 2, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
local id = string.sub(KEYS[1], 17)
if ARGV[1] ~= 'queued' then redis.call('ZREM', KEYS[3], id) end
redis.call('PUBLISH', KEYS[2], id)
return 1
"""

# Dedup, the queue bound and the records of a whole batch in one step, so that concurrent
# submissions can neither run identical requests twice nor overshoot the bound.
# KEYS: active, queued. ARGV: bound, dedup ttl, episode key prefix, then 6 per request:
# fresh id, dedup key ('' when not shareable), created, record ttl, request json, mode.
# → {0, depth} when the bound refuses the batch (nothing written), else
#   {1, depth, id1, new1, id2, new2, …}: each request's episode, and whether it is new.
_CREATE = """
local prefix = ARGV[3]
local n = (#ARGV - 3) / 6
local ids, new, seen = {}, {}, {}
local fresh = 0
for i = 1, n do
  local base = 3 + (i - 1) * 6
  local dedup = ARGV[base + 2]
  local shared = nil
  if dedup ~= '' then
    shared = seen[dedup]
    if not shared then
      local existing = redis.call('GET', dedup)
      if existing then
        local status = redis.call('HGET', prefix .. existing, 'status')
        if status and status ~= 'failed' and status ~= 'cancelled' then shared = existing end
      end
    end
  end
  if shared then
    ids[i], new[i] = shared, 0
  else
    ids[i], new[i] = ARGV[base + 1], 1
    fresh = fresh + 1
    if dedup ~= '' then seen[dedup] = ids[i] end
  end
end
local depth = redis.call('ZCARD', KEYS[2])
if fresh > 0 and depth + fresh > tonumber(ARGV[1]) then return {0, depth} end
for i = 1, n do
  if new[i] == 1 then
    local base = 3 + (i - 1) * 6
    local key = prefix .. ids[i]
    redis.call('HSET', key, 'request', ARGV[base + 5], 'status', 'queued',
               'created', ARGV[base + 3], 'mode', ARGV[base + 6])
    redis.call('EXPIRE', key, tonumber(ARGV[base + 4]))
    redis.call('ZADD', KEYS[1], ARGV[base + 3], ids[i])
    redis.call('ZADD', KEYS[2], ARGV[base + 3], ids[i])
    if ARGV[base + 2] ~= '' then
      redis.call('SET', ARGV[base + 2], ids[i], 'EX', tonumber(ARGV[2]))
    end
  end
end
local out = {1, depth + fresh}
for i = 1, n do
  out[#out + 1] = ids[i]
  out[#out + 1] = new[i]
end
return out
"""


SUMMARY_FIELDS = ("status", "worker", "mode", "created", "last_action")


@dataclass(frozen=True, slots=True)
class Admission:
    """What creating a batch did: each request's episode (new, or an identical one's)."""

    ids: list[str]
    new: list[bool]
    depth: int  # episodes queued after the call; at refusal, before it
    refused: bool  # the queue bound was reached: nothing was written


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
        self._create = client.register_script(_CREATE)

    # ------------------------------------------------------------------ writing

    def create_fields(self, request: EpisodeCreate) -> dict[str, str]:
        now = time.time()
        return {
            "request": request.model_dump_json(),
            "status": EpisodeStatus.queued.value,
            "created": repr(now),
            "mode": request.mode.value,
        }

    def record_ttl_s(self, request: EpisodeCreate) -> int:
        """A live episode must outlive its longest possible run; `finish` shortens it."""
        return self.result_ttl_s + 2 * 3600 + int(request.task.limits.timeout_s)

    def add(self, pipe: Any, episode_id: str, request: EpisodeCreate) -> None:
        """Queue the record's creation on a pipeline, with neither dedup nor a bound."""
        key = episode_key(episode_id)
        fields = self.create_fields(request)
        pipe.hset(key, mapping=fields)
        pipe.expire(key, self.record_ttl_s(request))
        pipe.zadd(ACTIVE, {episode_id: float(fields["created"])})
        pipe.zadd(QUEUED, {episode_id: float(fields["created"])})

    def create(
        self,
        requests: Sequence[EpisodeCreate],
        *,
        dedup_keys: Sequence[str | None],
        max_queued: int,
        dedup_ttl_s: int,
    ) -> Admission:
        """Create the records of a batch in one atomic step (see `_CREATE`).

        A request with a dedup key shares the episode of an identical one (in the batch or
        already stored) unless that one failed or was cancelled. The caller enqueues the new
        ones afterwards; should it die in between, the janitor ends them (no job).
        """
        args: list[Any] = [max_queued, max(dedup_ttl_s, 1), f"{PREFIX}episode:"]
        for request, dedup in zip(requests, dedup_keys, strict=True):
            fields = self.create_fields(request)
            args += [new_episode_id(), dedup or "", fields["created"],
                     self.record_ttl_s(request), fields["request"], fields["mode"]]
        reply = self._create(keys=[ACTIVE, QUEUED], args=args)
        if int(reply[0]) == 0:
            return Admission(ids=[], new=[], depth=int(reply[1]), refused=True)
        pairs = reply[2:]
        return Admission(ids=[_text(x) for x in pairs[0::2]],
                         new=[int(x) == 1 for x in pairs[1::2]],
                         depth=int(reply[1]), refused=False)

    def advance(self, episode_id: str, status: EpisodeStatus, **fields: str) -> bool:
        args: list[str] = [status.value]
        for name, value in fields.items():
            args += [name, value]
        keys = [episode_key(episode_id), EVENTS_CHANNEL, QUEUED]
        return int(self._advance(keys=keys, args=args)) == 1

    def finish(self, result: EpisodeResult) -> bool:
        """Write the terminal result; False when the episode had already ended (or is gone)."""
        assert result.status.terminal, result.status
        verdict = result.verdict.value if result.verdict else "none"
        timings = result.timings
        values = [timings.total_s, timings.queued_s, timings.run_s, timings.sandbox_start_s]
        finished = result.finished_at or datetime.now(UTC)
        result = result.model_copy(update={"finished_at": finished})
        keys = [episode_key(result.id), ACTIVE, VERDICT_STATS]
        keys += [latency_key(m) for m in LATENCY_METRICS] + [EVENTS_CHANNEL, QUEUED]
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

    def queued_count(self) -> int:
        """Episodes not started yet: what the queue bound counts."""
        return int(self.redis.zcard(QUEUED))

    def queued_ids(self, *, older_than_s: float) -> list[str]:
        """Episodes created over `older_than_s` ago and not started yet."""
        until = time.time() - older_than_s
        return [_text(x) for x in self.redis.zrangebyscore(QUEUED, "-inf", until)]

    def drop_ids(self, episode_ids: Sequence[str]) -> None:
        """Take ids whose record is gone (expired) out of the live sets."""
        if episode_ids:
            pipe = self.redis.pipeline(transaction=False)
            pipe.zrem(ACTIVE, *episode_ids)
            pipe.zrem(QUEUED, *episode_ids)
            pipe.execute()

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
        pipe.hdel(WORKER_IMAGES, worker)
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

    # ------------------------------------------------------------------ image registry

    def publish_images(self, worker: str, images: Mapping[str, str | None]) -> None:
        """What a worker can run now: image name → None when it can, else why not.

        Workers call this as they re-check their images (an image can vanish after start).
        A claim counts only while its worker's heartbeat is fresh, so it dies with it.
        """
        report = json.dumps({"at": time.time(), "images": dict(images)})
        self.redis.hset(WORKER_IMAGES, worker, report)

    def unrunnable_images(self, names: Iterable[str], *, ttl_s: float) -> dict[str, str]:
        """The image names no live worker can run, each with every worker's reason.

        A live worker runs an image when it reports no problem and its image report (if
        it sent one within `ttl_s`) lists the image as runnable; a healthy worker without a
        fresh report checked all its images when it started. No live worker at all says
        nothing about images (they may be starting): that is `/readyz`'s to report.
        """
        wanted = list(dict.fromkeys(names))
        workers = self.live_workers(ttl_s)
        if not wanted or not workers:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        pipe.hmget(WORKER_PROBLEMS, workers)
        pipe.hmget(WORKER_IMAGES, workers)
        problem_values, report_values = pipe.execute()
        reasons: dict[str, list[str]] = {name: [] for name in wanted}
        runnable: set[str] = set()
        now = time.time()
        for worker, problem, raw in zip(workers, problem_values, report_values, strict=True):
            if problem:
                for name in wanted:
                    reasons[name].append(f"{worker}: {_text(problem)}")
                continue
            report = json.loads(_text(raw)) if raw else None
            if report is None or now - float(report["at"]) > ttl_s:
                runnable.update(wanted)  # checked at start; no newer word
                break
            for name in wanted:
                if name not in report["images"]:
                    reasons[name].append(f"{worker}: not configured on this worker")
                elif report["images"][name] is None:
                    runnable.add(name)
                else:
                    reasons[name].append(f"{worker}: {report['images'][name]}")
        return {name: "; ".join(why) for name, why in reasons.items() if name not in runnable}

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


class ReplyWaiter:
    """Blocks on reply keys (see `reply_key`) over a client of its own.

    Its socket timeout outlasts the longest wait it serves: with redis-py's default of 5 s,
    every wait longer than that ended as a Redis error (a 503) while the worker went on
    running the action. A dead Redis still ends a wait at once (the connection closes).
    """

    def __init__(self, url: str, *, longest_wait_s: float) -> None:
        self.longest_wait_s = longest_wait_s
        self.redis = aioredis.Redis.from_url(
            url, socket_timeout=longest_wait_s + BLOCKING_SOCKET_MARGIN_S,
            health_check_interval=30)

    async def wait(self, key: str, timeout_s: float) -> dict[str, Any] | None:
        """The reply pushed to `key` (see `EpisodeStore.reply`), or None after `timeout_s`."""
        if timeout_s > self.longest_wait_s:
            raise ValueError(f"a wait of {timeout_s} s is longer than this waiter's "
                             f"{self.longest_wait_s} s")
        popped = await self.redis.blpop([key], timeout=timeout_s)
        if popped is None:
            return None
        reply: dict[str, Any] = json.loads(popped[1])
        return reply

    async def close(self) -> None:
        await self.redis.aclose()


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
