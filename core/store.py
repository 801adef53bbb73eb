"""Episode records in Redis: the one source of truth for status and results.

API processes and workers share this module. Every state change goes through a Lua script,
so a terminal state is written exactly once — whoever gets there first (the worker with a
result, the janitor with an abandoned episode, the API with a cancel) wins, and the others
see `False` and discard their outcome. The same script counts verdicts and latencies, so
`/metrics` is the same on every API replica however many workers there are. The statuses
the scripts compare against come from `EpisodeStatus` (`_LUA_STATUSES`), their keys from
core/keys.py; an episode's hash is read and written as typed records (`EpisodeRecord`,
`SandboxState`), never field by field outside this module.

Keys (all under `proctor:`, each built by the function or constant of core/keys.py named
on the right; RQ's own keys, `rq:…`, are RQ's):
    episode:{id}          hash: the record (fields below)                     episode()
    steps:{id}            list: an interactive episode's steps, JSON, in order steps()
    active                zset: non-terminal episode ids by creation time     ACTIVE
    queued                zset: episode ids not started yet, by creation time: QUEUED
                          what the queue bound counts (written with the record)
    pace                  hash: gap (s, a moving average of the time between  PACE
                          two ends while episodes wait: the drain rate) and
                          gaps (how many it has counted, up to 20), busy
                          (s, of a worker's time on a one-shot episode), the
                          last end's time and whether episodes have waited
                          since (cleared when the queue runs dry): what the
                          wait bound estimates a newcomer's wait from
    dedup:{sha256}        string: the episode of an identical one-shot request dedup()
                          (expires after PROCTOR_DEDUP_TTL_S)
    events                pub/sub: an episode id when it ends, and when an     EVENTS
                          interactive one's sandbox is ready (what waits wait for)
    repo:{sha256}         hash: a sealed repository, archive (tar.gz), base,   repo()
                          branch (expires after PROCTOR_REPO_TTL_S, renewed
                          by each use; core/repos.py)
    repo-sealing:{sha256} string: held while a worker seals a repository     repo_sealing()
                          read out of an image; the others wait for repo:
    reply:{token}         list: a worker's answer to one request the API       reply()
                          blocks on, JSON {status, body, message}
    acting:{id}           string: held while an interactive action runs        acting()
    stats:verdict         hash: verdict → count                                VERDICTS
    stats:latency:{m}     hash: one bucket per episode (b=…), sum, count,      latency()
                          for m in total / queued / run / sandbox_start
    stats:counters        hash: JSON [name, [[label, value], …]] → count       COUNTERS
    workers               zset: worker name → last heartbeat (unix time)       WORKERS
    worker-hosts          hash: worker name → its host id                      WORKER_HOSTS
    worker-problems       hash: worker name → why it cannot run episodes       WORKER_PROBLEMS
    worker-images         hash: worker name → JSON {at, images: {name: null    WORKER_IMAGES
                          (runnable) or why not}}
    judge:{digest}        string: a cached judge verdict, JSON                 judge_cache()
    reservations:{host}   hash: episode id → JSON [worker, millicpus,         reservations()
                          memory MiB]: what the host's running episodes hold
                          of its budget (`reserve`, `release`)
    waiting:{host}        zset: episode id → when it first asked: the line     waiting()
                          of episodes waiting for a share (`reserve`)
    waiting-asked:{host}  hash: episode id → when it last asked (a silent      waiting_asked()
                          one leaves the line)
    images-used:{host}    zset: task image reference → when an episode of the  images_used()
                          host last used it (the pull cache's LRU order)
    image-pulls:{host}    hash: task image reference → pulls made on the host  image_pulls()
    image-pull:{h}        string: held by the one worker of a host pulling an  image_pull()
                          image (h: sha256 of host and reference; expires)
    image-missing:{h}     string: why the registry has no such image (h:      image_missing()
                          sha256 of the reference; PROCTOR's IMAGE_MISSING_TTL_S)
    prefetch:{id}         hash: a prefetch's images and hosts (JSON) and one   prefetch()
                          field per host|image: its state (service/prefetch.py)
    catalog:ended         zset: ended episode ids by end time                  CATALOG
    catalog:by:{term}     zset: the same, of one verdict, mode or metadata     catalog_term()
                          pair (`catalog_terms`)
    catalog:minute:{m}    hash: what ended in minute m (unix time // 60): n,   catalog_minute()
                          v:{verdict}, c:{category}, timed, sum (total s),
                          t:{le} (total s, one bucket each, not cumulative)
    catalog:scratch:{t}   zset: an intersection a count builds and deletes     catalog_scratch()
                          in the same MULTI (service/catalog.py)
    catalog:rules         hash: rule id → episodes it hit                      CATALOG_RULES
    catalog:categories    hash: cheat category → episodes it was seen in       CATALOG_CATEGORIES

The catalog (`catalog:*`, read by service/catalog.py) is written by the finish script with
the terminal result, so it lists exactly the episodes that ended: per episode one ZADD
(+ a trim and an EXPIRE) into `catalog:ended` and into each of its terms' sets (its
verdict, its mode, its short metadata pairs: at most `CATALOG_METADATA_TERMS`), one
`summary` field in its record, and ~5 HINCRBYs into its minute — all in the same call, no
extra round trip. Sets are trimmed to the result TTL as they are written (and expire
with it when nothing is written), so they hold what the records still hold.

Fields of `episode:{id}` (`RecordField`), by who writes them:
    request, status, mode, created   the API, creating it (`create`, `add`)
    worker, host                     the worker that starts it (`advance`)
    container                        one-shot: its container's name (`advance`)
    container, container_name, container_ip, keep, restore, observation, sandbox_start_s,
    warm, last_action                interactive: the started sandbox (`start_sandbox`,
                                     `SandboxState`); last_action again at every action
    steps                            interactive: the steps so far (`add_step`)
    result, finished                 whoever ends it (`finish`); with a sink (core/sink.py),
                                     that process also appends the episode's row to disk
    summary                          the same, for the catalog: `CatalogEntry`, JSON
"""

from __future__ import annotations

import json
import re
import time
import uuid
from base64 import b64decode, b64encode
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar

import redis
import redis.asyncio as aioredis
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from core import defaults, keys, latency
from core.sink import EpisodeSink
from proctor.models import (
    EpisodeCreate,
    EpisodeMode,
    EpisodeResult,
    EpisodeStatus,
    Observation,
    Step,
    Verdict,
)

LATENCY_BUCKETS = defaults.LATENCY_BUCKETS
LATENCY_METRICS = ("total", "queued", "run", "sandbox_start")
LATENCY_FIELDS = json.dumps([[le, latency.bucket_field(le)] for le in LATENCY_BUCKETS])
TERMINAL = tuple(s.value for s in EpisodeStatus if s.terminal)
# an identical request does not share an episode that ended like this: it runs again
UNSHAREABLE = (EpisodeStatus.failed.value, EpisodeStatus.cancelled.value)
# the weight of the newest episode in the pace (`_FINISH`): a memory of ~10 episodes
PACE_WEIGHT = 0.2
# … and of the newest gap between two ends, once there were 20: a memory of ~40 ends (one
# gap is noisy: with many workers, ends come at random moments)
GAP_WEIGHT = 0.05


M = TypeVar("M", bound=BaseModel)
_SURROGATES = re.compile("[\ud800-\udfff]")


def storable(model: M) -> tuple[M, str]:
    """A result, step or observation that can be stored, and its JSON, whatever text its
    sandbox put in it. A lone surrogate (a file name's byte that is not UTF-8, an escape the
    code under test wrote in its completion record) has no UTF-8: it becomes U+FFFD instead
    of failing the episode."""
    try:
        return model, model.model_dump_json()
    except PydanticSerializationError:
        clean = type(model).model_validate(_without_surrogates(model.model_dump(mode="json")))
        return clean, clean.model_dump_json()


def dump_json(model: BaseModel) -> str:
    return storable(model)[1]


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATES.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    return value


class RecordField(StrEnum):
    """The fields of an episode's hash (see the module docstring)."""

    request = "request"
    status = "status"
    mode = "mode"
    created = "created"
    worker = "worker"
    host = "host"
    container = "container"
    container_name = "container_name"
    container_ip = "container_ip"
    keep = "keep"
    restore = "restore"
    observation = "observation"
    sandbox_start_s = "sandbox_start_s"
    warm = "warm"
    last_action = "last_action"
    steps = "steps"
    result = "result"
    finished = "finished"
    summary = "summary"


def new_episode_id() -> str:
    return "ep_" + uuid.uuid4().hex


def _lua_set(name: str, values: Iterable[str]) -> str:
    items = ", ".join(f"[{json.dumps(v)}] = true" for v in values)
    return f"local {name} = {{{items}}}\n"


# The statuses the scripts need, generated from `EpisodeStatus` and put in front of each.
_LUA_STATUSES = (
    _lua_set("TERMINAL", TERMINAL)
    + _lua_set("UNSHAREABLE", UNSHAREABLE)
    + f"local QUEUED = {json.dumps(EpisodeStatus.queued.value)}\n"
    + f"local RUNNING = {json.dumps(EpisodeStatus.running.value)}\n"
    + f"local INTERACTIVE = {json.dumps(EpisodeMode.interactive.value)}\n"
)

# KEYS: episode, active, verdict stats, latency keys (total, queued, run, sandbox_start),
# events, queued, pace
# ARGV: id, status, result json, verdict, ttl, then per latency metric: value or "" (4 values),
# finished (unix time), latency buckets (JSON list of [bound, field]: Lua would print 1.0 as "1")
_FINISH = (
    _LUA_STATUSES
    + f"local PACE_WEIGHT = {PACE_WEIGHT}\n"
    + f"local GAP_WEIGHT = {GAP_WEIGHT}\n"
    + """
local cur = redis.call('HGET', KEYS[1], 'status')
if not cur then return -1 end
if TERMINAL[cur] then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'result', ARGV[3], 'finished', ARGV[10],
           'summary', ARGV[12])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[5]))
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[9], ARGV[1])
redis.call('HINCRBY', KEYS[3], ARGV[4], 1)
-- the pace (`_CREATE`'s wait bound): a worker's time on a one-shot episode, total - queued
if ARGV[6] ~= '' and ARGV[7] ~= '' and redis.call('HGET', KEYS[1], 'mode') ~= INTERACTIVE then
  local busy = math.max(tonumber(ARGV[6]) - tonumber(ARGV[7]), 0)
  local mean = tonumber(redis.call('HGET', KEYS[10], 'busy'))
  mean = mean and mean + (busy - mean) * PACE_WEIGHT or busy
  redis.call('HSET', KEYS[10], 'busy', tostring(mean))
end
-- the drain rate: the gap between this end and the last, when episodes waited throughout
-- (at both ends, and the queue never ran dry in between: `_ADVANCE`), so no worker idled
-- in between; Redis's clock, one for every host
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1e6
local waiting = redis.call('ZCARD', KEYS[9]) > 0 and 1 or 0
local last = redis.call('HMGET', KEYS[10], 'last', 'waiting', 'gap', 'gaps')
if waiting == 1 and last[2] == '1' then
  local gap = math.max(now - tonumber(last[1]), 0)
  -- the mean of the gaps so far, then (from 1 / GAP_WEIGHT of them) a moving average: the
  -- first few gaps, often of a slow start, do not outweigh the next ones for long
  local n = math.min((tonumber(last[4]) or 0) + 1, 1 / GAP_WEIGHT)
  local mean = tonumber(last[3])
  mean = mean and mean + (gap - mean) / n or gap
  redis.call('HSET', KEYS[10], 'gap', tostring(mean), 'gaps', n)
end
redis.call('HSET', KEYS[10], 'last', tostring(now), 'waiting', waiting)
local buckets = cjson.decode(ARGV[11])
for i = 1, 4 do
  local v = ARGV[5 + i]
  if v ~= '' then
    local x = tonumber(v)
    local key = KEYS[3 + i]
    redis.call('HINCRBYFLOAT', key, 'sum', x)
    redis.call('HINCRBY', key, 'count', 1)
    -- one bucket per episode (b=…, not cumulative): the reader sums them up
    for _, b in ipairs(buckets) do
      if x <= b[1] then redis.call('HINCRBY', key, b[2], 1) break end
    end
  end
end
-- the catalog (see the module docstring): KEYS[11] the minute, KEYS[12] rule hits,
-- KEYS[13] category counts, KEYS[14..] the sets the episode is listed in.
-- ARGV[12] summary, ARGV[13] trim score, ARGV[14] latency bucket, ARGV[15] rules (JSON),
-- ARGV[16] categories (JSON)
local ttl = tonumber(ARGV[5])
local minute = KEYS[11]
redis.call('HINCRBY', minute, 'n', 1)
redis.call('HINCRBY', minute, 'v:' .. ARGV[4], 1)
if ARGV[14] ~= '' then
  redis.call('HINCRBY', minute, 'timed', 1)
  redis.call('HINCRBYFLOAT', minute, 'sum', tonumber(ARGV[6]))
  redis.call('HINCRBY', minute, 't:' .. ARGV[14], 1)
end
for _, c in ipairs(cjson.decode(ARGV[16])) do
  redis.call('HINCRBY', minute, 'c:' .. c, 1)
  redis.call('HINCRBY', KEYS[13], c, 1)
end
redis.call('EXPIRE', minute, ttl)
for _, r in ipairs(cjson.decode(ARGV[15])) do redis.call('HINCRBY', KEYS[12], r, 1) end
for i = 14, #KEYS do
  redis.call('ZADD', KEYS[i], ARGV[10], ARGV[1])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', '(' .. ARGV[13])
  redis.call('EXPIRE', KEYS[i], ttl)
end
redis.call('PUBLISH', KEYS[8], ARGV[1])
return 1
"""
)

# Move a live episode forward (queued → starting → running → evaluating) unless it ended.
# Only what a wait waits for is published: an interactive episode's sandbox being ready
# (running); the end is published by `_FINISH`.
# KEYS: episode, events, queued, pace. ARGV: id, status, then field, value pairs.
_ADVANCE = (
    _LUA_STATUSES
    + """
local cur = redis.call('HGET', KEYS[1], 'status')
if not cur then return -1 end
if TERMINAL[cur] then return 0 end
local id = ARGV[1]
local fields = {'status', ARGV[2]}  -- the status and the fields, in one HSET
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
if ARGV[2] ~= QUEUED and redis.call('ZREM', KEYS[3], id) == 1
   and redis.call('ZCARD', KEYS[3]) == 0 then
  -- the queue ran dry: until the next end, workers may idle, so that gap is no drain
  redis.call('HSET', KEYS[4], 'waiting', 0)
end
if ARGV[2] == RUNNING and redis.call('HGET', KEYS[1], 'mode') == INTERACTIVE then
  redis.call('PUBLISH', KEYS[2], id)
end
return 1
"""
)

# Dedup, the queue bounds and the records of a whole batch in one step, so that concurrent
# submissions can neither run identical requests twice nor overshoot a bound. Two bounds:
# the queue's depth, and (when set) the wait of the batch's last episode: what is queued
# times the mean gap between two ends while episodes waited throughout (the drain rate,
# `_FINISH`; Little's law). Until episodes have waited, a worker's mean time on an episode
# over the live workers stands in (it misses what a worker spends between episodes); until
# an episode has ended only the depth bound holds. With nothing queued a batch passes the
# wait bound, so one larger than it still gets in.
# KEYS: active, queued, pace, workers. ARGV: depth bound, wait bound (s, 0: none), dedup
# ttl, episode key prefix, live since (the heartbeat cutoff), then 6 per request: fresh
# id, dedup key ('' when not shareable), created, record ttl, request json, mode.
# → {0, depth, wait ms, reopen ms} when a bound refuses the batch (nothing written; wait -1:
#   the depth bound; reopen: the drain time until a single new episode would pass), else
#   {1, depth, id1, new1, id2, new2, …}: each request's episode, and whether it is new.
_CREATE = (
    _LUA_STATUSES
    + """
local prefix = ARGV[4]
local n = (#ARGV - 5) / 6
local ids, new, seen = {}, {}, {}
local fresh = 0
for i = 1, n do
  local base = 5 + (i - 1) * 6
  local dedup = ARGV[base + 2]
  local shared = nil
  if dedup ~= '' then
    shared = seen[dedup]
    if not shared then
      local existing = redis.call('GET', dedup)
      if existing then
        local status = redis.call('HGET', prefix .. existing, 'status')
        if status and not UNSHAREABLE[status] then shared = existing end
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
if fresh > 0 then
  local bound, most = tonumber(ARGV[1]), tonumber(ARGV[2])
  local full = depth + fresh > bound
  if full or (most > 0 and depth > 0) then
    -- the seconds the queue takes to drain by one episode, when known
    local pace = redis.call('HMGET', KEYS[3], 'gap', 'busy')
    local per = tonumber(pace[1])
    if not per and pace[2] then
      per = tonumber(pace[2]) / math.max(redis.call('ZCOUNT', KEYS[4], ARGV[5], '+inf'), 1)
    end
    if full then
      local reopen = per and (depth + 1 - bound) * per or 0
      return {0, depth, -1, math.floor(math.max(reopen, 0) * 1000)}
    end
    local wait = per and (depth + fresh) * per
    if wait and wait > most then
      local reopen = math.max((depth + 1) * per - most, 0)
      return {0, depth, math.floor(wait * 1000), math.floor(reopen * 1000)}
    end
  end
end
for i = 1, n do
  if new[i] == 1 then
    local base = 5 + (i - 1) * 6
    local key = prefix .. ids[i]
    redis.call('HSET', key, 'request', ARGV[base + 5], 'status', QUEUED,
               'created', ARGV[base + 3], 'mode', ARGV[base + 6])
    redis.call('EXPIRE', key, tonumber(ARGV[base + 4]))
    redis.call('ZADD', KEYS[1], ARGV[base + 3], ids[i])
    redis.call('ZADD', KEYS[2], ARGV[base + 3], ids[i])
    if ARGV[base + 2] ~= '' then
      redis.call('SET', ARGV[base + 2], ids[i], 'EX', tonumber(ARGV[3]))
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
)


# Take an episode's share of its host's budget, first come first served: the episodes that
# wait stand in line (a sorted set by arrival), and only the first in line may take a share,
# when it fits the budget beside the shares held (a host holding nothing takes any one
# episode: admission let it in). Without the line, a worker that just gave a share back
# takes it again before any waiter polls, and a waiter can starve past its wait (seen: 16 s
# of 20 with 8 workers on 4 shares). A waiter that stopped asking (its worker died) leaves
# the line once it reaches its head.
# KEYS: the host's reservations, its line, the line's last-asked times. ARGV: episode id,
# worker, millicpus, memory MiB, the budget's millicpus, its memory MiB, the keys' ttl,
# how long a silent waiter keeps its place. → 1 taken (or held already), 0 not yet
_RESERVE = """
local episode = ARGV[1]
local share = cjson.encode({ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])})
local ttl = tonumber(ARGV[7])
local taken = redis.call('HEXISTS', KEYS[1], episode) == 1
if not taken then
  local clock = redis.call('TIME')
  local now = tonumber(clock[1]) + tonumber(clock[2]) / 1e6
  redis.call('ZADD', KEYS[2], 'NX', now, episode)
  redis.call('HSET', KEYS[3], episode, now)
  redis.call('EXPIRE', KEYS[2], ttl)
  redis.call('EXPIRE', KEYS[3], ttl)
  while true do
    local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
    if head == episode then break end
    if tonumber(redis.call('HGET', KEYS[3], head) or 0) >= now - tonumber(ARGV[8]) then
      return 0
    end
    redis.call('ZREM', KEYS[2], head)
    redis.call('HDEL', KEYS[3], head)
  end
  local cpus, memory, held = 0, 0, 0
  for _, raw in ipairs(redis.call('HVALS', KEYS[1])) do
    local r = cjson.decode(raw)
    cpus, memory, held = cpus + r[2], memory + r[3], held + 1
  end
  if held > 0 and (cpus + tonumber(ARGV[3]) > tonumber(ARGV[5])
                   or memory + tonumber(ARGV[4]) > tonumber(ARGV[6])) then
    return 0
  end
  redis.call('ZREM', KEYS[2], episode)
  redis.call('HDEL', KEYS[3], episode)
end
redis.call('HSET', KEYS[1], episode, share)
redis.call('EXPIRE', KEYS[1], ttl)
return 1
"""

# Give back the shares one worker holds among the episodes named (what a worker that died
# held; a share it no longer holds stays). KEYS: the host's reservations.
# ARGV: worker, episode ids. → how many were given back
_RELEASE_OF = """
local n = 0
for i = 2, #ARGV do
  local raw = redis.call('HGET', KEYS[1], ARGV[i])
  if raw and cjson.decode(raw)[1] == ARGV[1] then
    redis.call('HDEL', KEYS[1], ARGV[i])
    n = n + 1
  end
end
return n
"""


SUMMARY_FIELDS = (
    RecordField.status,
    RecordField.worker,
    RecordField.mode,
    RecordField.created,
    RecordField.last_action,
)


class MissingSandbox(KeyError):
    """The record has no sandbox state (not an interactive episode that started)."""


@dataclass(frozen=True, slots=True)
class Admission:
    """What creating a batch did: each request's episode (new, or an identical one's)."""

    ids: list[str]
    new: list[bool]
    depth: int  # episodes queued after the call; at refusal, before it
    refused: bool  # a queue bound was reached: nothing was written
    wait_s: float | None = None  # refused by the wait bound: the wait it estimated
    reopen_s: float = 0.0  # refused: by the drain rate, when a single new episode would pass


@dataclass(frozen=True, slots=True)
class EpisodeSummary:
    id: str
    status: EpisodeStatus
    worker: str | None
    interactive: bool
    created: float
    last_action: float


@dataclass(frozen=True, slots=True)
class Share:
    """What one running episode holds of its host's budget (see `EpisodeStore.reserve`)."""

    worker: str  # the worker process that took it
    millicpus: int
    memory_mb: int


@dataclass(frozen=True, slots=True)
class SandboxState:
    """An interactive episode's sandbox as its start leaves it for the actions and the
    finish; encoded into (and decoded from) the record's fields here and nowhere else."""

    host: str  # the worker host that holds the container (its queue takes the actions)
    container_id: str
    container_name: str
    container_ip: str | None
    keep: frozenset[str]  # paths the grading leaves as the agent wrote them
    restore: Mapping[str, str | bytes]  # protected path → what the grading puts back
    observation: Observation  # the first observation, the answer to the create
    sandbox_start_s: float
    warm: bool  # the container came from the warm pool

    def encode(self) -> dict[str, str]:
        return {
            RecordField.host: self.host,
            RecordField.container: self.container_id,
            RecordField.container_name: self.container_name,
            RecordField.container_ip: self.container_ip or "",
            RecordField.keep: json.dumps(sorted(self.keep)),
            RecordField.restore: json.dumps(
                {
                    p: c if isinstance(c, str) else {"b64": b64encode(c).decode()}
                    for p, c in self.restore.items()
                }
            ),
            RecordField.observation: dump_json(self.observation),
            RecordField.sandbox_start_s: repr(self.sandbox_start_s),
            RecordField.warm: "1" if self.warm else "0",
        }

    @classmethod
    def decode(cls, fields: Mapping[str, str]) -> SandboxState | None:
        """The state in a record's fields; None before the sandbox was started."""
        if RecordField.observation not in fields or RecordField.container not in fields:
            return None
        return cls(
            host=fields.get(RecordField.host, ""),
            container_id=fields[RecordField.container],
            container_name=fields.get(RecordField.container_name, ""),
            container_ip=fields.get(RecordField.container_ip) or None,
            keep=frozenset(json.loads(fields.get(RecordField.keep, "[]"))),
            restore={
                p: c if isinstance(c, str) else b64decode(c["b64"])
                for p, c in json.loads(fields.get(RecordField.restore, "{}")).items()
            },
            observation=Observation.model_validate_json(fields[RecordField.observation]),
            sandbox_start_s=float(fields.get(RecordField.sandbox_start_s, 0)),
            warm=fields.get(RecordField.warm) == "1",
        )


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """An episode's hash, decoded (see the module docstring for who writes what)."""

    id: str
    status: EpisodeStatus
    request: EpisodeCreate
    created: float
    result: EpisodeResult | None
    worker: str | None = None
    host: str | None = None
    container: str | None = None  # one-shot: the container's name; interactive: its id
    last_action: float | None = None
    steps: int = 0
    finished: float | None = None
    sandbox: SandboxState | None = None  # interactive, once started

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

    def started_sandbox(self) -> SandboxState:
        """The interactive sandbox; `MissingSandbox` when it was never started."""
        if self.sandbox is None:
            raise MissingSandbox(f"episode {self.id} has no sandbox")
        return self.sandbox


@dataclass(frozen=True, slots=True)
class ImageReport:
    """What one worker said it can run (`worker-images`): image name → None or why not."""

    at: float
    images: Mapping[str, str | None]

    def encode(self) -> str:
        return json.dumps({"at": self.at, "images": dict(self.images)})

    @classmethod
    def decode(cls, raw: str) -> ImageReport:
        report = json.loads(raw)
        return cls(at=float(report["at"]), images=report["images"])


# A metadata pair is a catalog term (filterable) when its value is at most this long, and
# an episode is listed under at most this many pairs (the model allows 64): the catalog's
# cost per episode stays small whatever a trainer puts there.
CATALOG_TERM_VALUE_CHARS = 128
CATALOG_METADATA_TERMS = 16
_SUMMARY_TEXT_CHARS = 200  # a summary's reason and metadata values are cut to this


def verdict_term(verdict: str) -> str:
    """The catalog term of a verdict ("none": an ended episode without one)."""
    return f"verdict={verdict}"


def mode_term(mode: str) -> str:
    return f"mode={mode}"


def metadata_term(key: str, value: str) -> str:
    """JSON, so that no key or value containing `=` can collide with another pair."""
    return "meta:" + json.dumps([key, value], separators=(",", ":"), ensure_ascii=False)


def catalog_terms(result: EpisodeResult) -> list[str]:
    """The terms an ended episode is listed under (each a `catalog:by:{term}` set)."""
    terms = [
        verdict_term(result.verdict.value if result.verdict else "none"),
        mode_term(result.mode.value),
    ]
    pairs = [
        (k, v) for k, v in sorted(result.metadata.items()) if len(v) <= CATALOG_TERM_VALUE_CHARS
    ]
    terms += [metadata_term(k, v) for k, v in pairs[:CATALOG_METADATA_TERMS]]
    return terms


def latency_bucket(total_s: float | None) -> str:
    """The one histogram bucket (`le`) a latency falls in, "+Inf" past the last; "" for none."""
    return latency.bucket_of(total_s)


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """What the catalog lists of an ended episode (its record's `summary`): small, so that
    a page of rows never parses whole results (which can be megabytes of output)."""

    id: str
    status: EpisodeStatus
    verdict: Verdict | None
    mode: EpisodeMode
    reward: float | None
    passed: bool | None
    duration_s: float | None
    image: str | None
    metadata: Mapping[str, str]
    created: float | None
    finished: float
    steps: int
    reason: str
    categories: tuple[str, ...]  # cheat categories seen (evidence, intercepted steps)
    rules: tuple[str, ...]  # the rules that hit

    @classmethod
    def of(cls, result: EpisodeResult, *, finished: float) -> CatalogEntry:
        categories = {e.category.value for e in result.cheat.evidence}
        categories |= {s.category.value for s in result.steps if s.category is not None}
        rules = {e.rule for e in result.cheat.evidence if e.rule}
        rules |= {s.rule for s in result.steps if s.rule}
        cut = _SUMMARY_TEXT_CHARS
        return cls(
            id=result.id,
            status=result.status,
            verdict=result.verdict,
            mode=result.mode,
            reward=result.reward,
            passed=result.passed,
            duration_s=result.timings.total_s,
            image=result.sandbox.image,
            metadata={k: v[:cut] for k, v in result.metadata.items()},
            created=result.created_at.timestamp() if result.created_at else None,
            finished=finished,
            steps=len(result.steps),
            reason=result.reason[:cut],
            categories=tuple(sorted(categories)),
            rules=tuple(sorted(rules)),
        )

    def encode(self) -> str:
        return json.dumps(
            {
                "id": self.id,
                "status": self.status.value,
                "verdict": self.verdict.value if self.verdict else None,
                "mode": self.mode.value,
                "reward": self.reward,
                "passed": self.passed,
                "duration_s": self.duration_s,
                "image": self.image,
                "metadata": dict(self.metadata),
                "created": self.created,
                "finished": self.finished,
                "steps": self.steps,
                "reason": self.reason,
                "categories": list(self.categories),
                "rules": list(self.rules),
            },
            ensure_ascii=False,
        )

    @classmethod
    def decode(cls, raw: str) -> CatalogEntry:
        d = json.loads(raw)
        return cls(
            id=d["id"],
            status=EpisodeStatus(d["status"]),
            verdict=Verdict(d["verdict"]) if d["verdict"] else None,
            mode=EpisodeMode(d["mode"]),
            reward=d["reward"],
            passed=d["passed"],
            duration_s=d["duration_s"],
            image=d["image"],
            metadata=d["metadata"],
            created=d["created"],
            finished=float(d["finished"]),
            steps=int(d["steps"]),
            reason=d["reason"],
            categories=tuple(d["categories"]),
            rules=tuple(d["rules"]),
        )


def _counter_field(name: str, labels: Mapping[str, str]) -> str:
    return json.dumps([name, sorted(labels.items())])


def _counter_parts(field: str) -> tuple[str, list[tuple[str, str]]]:
    name, labels = json.loads(field)
    return name, [(k, v) for k, v in labels]


class EpisodeStore:
    """Typed access to episode records; one instance per process, sharing its Redis client."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        result_ttl_s: int = defaults.RESULT_TTL_S,
        sink: EpisodeSink | None = None,
    ) -> None:
        self.redis = client
        self.result_ttl_s = result_ttl_s
        self.sink = sink  # a durable copy of each result this process stores (core/sink.py)
        self._finish = client.register_script(_FINISH)
        self._advance = client.register_script(_ADVANCE)
        self._create = client.register_script(_CREATE)
        self._reserve = client.register_script(_RESERVE)
        self._release_of = client.register_script(_RELEASE_OF)

    # ------------------------------------------------------------------ writing

    def create_fields(self, request: EpisodeCreate) -> dict[str, str]:
        now = time.time()
        return {
            RecordField.request: request.model_dump_json(),
            RecordField.status: EpisodeStatus.queued.value,
            RecordField.created: repr(now),
            RecordField.mode: request.mode.value,
        }

    def record_ttl_s(self, request: EpisodeCreate) -> int:
        """A live episode must outlive its longest possible run; `finish` shortens it."""
        timeout_s = int(request.task.limits.timeout_s)
        return self.result_ttl_s + defaults.LIVE_RECORD_MARGIN_S + timeout_s

    def add(self, pipe: Any, episode_id: str, request: EpisodeCreate) -> None:
        """Queue the record's creation on a pipeline, with neither dedup nor a bound."""
        key = keys.episode(episode_id)
        fields = self.create_fields(request)
        created = float(fields[RecordField.created])
        pipe.hset(key, mapping=fields)
        pipe.expire(key, self.record_ttl_s(request))
        pipe.zadd(keys.ACTIVE, {episode_id: created})
        pipe.zadd(keys.QUEUED, {episode_id: created})

    def create(
        self,
        requests: Sequence[EpisodeCreate],
        *,
        dedup_keys: Sequence[str | None],
        max_queued: int,
        max_wait_s: float = 0.0,
        worker_ttl_s: float = defaults.HEARTBEAT_TTL_S,
        dedup_ttl_s: int,
    ) -> Admission:
        """Create the records of a batch in one atomic step (see `_CREATE`).

        The wait bound counts the workers heard from within `worker_ttl_s` as live.
        A request with a dedup key shares the episode of an identical one (in the batch or
        already stored) unless that one failed or was cancelled. The caller enqueues the new
        ones afterwards; should it die in between, the janitor ends them (no job).
        """
        live_since = time.time() - worker_ttl_s
        args: list[Any] = [max_queued, max_wait_s, max(dedup_ttl_s, 1), keys.EPISODE_PREFIX]
        args.append(live_since)
        for request, dedup in zip(requests, dedup_keys, strict=True):
            fields = self.create_fields(request)
            args += [
                new_episode_id(),
                dedup or "",
                fields[RecordField.created],
                self.record_ttl_s(request),
                fields[RecordField.request],
                fields[RecordField.mode],
            ]
        script_keys = [keys.ACTIVE, keys.QUEUED, keys.PACE, keys.WORKERS]
        reply = self._create(keys=script_keys, args=args)
        if int(reply[0]) == 0:
            wait_ms = int(reply[2])
            return Admission(
                ids=[],
                new=[],
                depth=int(reply[1]),
                refused=True,
                wait_s=wait_ms / 1000 if wait_ms >= 0 else None,
                reopen_s=int(reply[3]) / 1000,
            )
        pairs = reply[2:]
        return Admission(
            ids=[_text(x) for x in pairs[0::2]],
            new=[int(x) == 1 for x in pairs[1::2]],
            depth=int(reply[1]),
            refused=False,
        )

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
        args: list[str] = [episode_id, status.value]
        for name, value in fields.items():
            args += [name, value]
        script_keys = [keys.episode(episode_id), keys.EVENTS, keys.QUEUED, keys.PACE]
        return int(self._advance(keys=script_keys, args=args)) == 1

    def finish(self, result: EpisodeResult, *, request: EpisodeCreate | None = None) -> bool:
        """Write the terminal result; False when the episode had already ended (or is gone).

        `request`: the episode's, when the caller holds it (the sink then need not read it)."""
        assert result.status.terminal, result.status
        verdict = result.verdict.value if result.verdict else "none"
        timings = result.timings
        values = [timings.total_s, timings.queued_s, timings.run_s, timings.sandbox_start_s]
        finished = result.finished_at or datetime.now(UTC)
        result, stored_json = storable(result.model_copy(update={"finished_at": finished}))
        script_keys = [keys.episode(result.id), keys.ACTIVE, keys.VERDICTS]
        script_keys += [keys.latency(m) for m in LATENCY_METRICS]
        script_keys += [keys.EVENTS, keys.QUEUED, keys.PACE]
        entry = CatalogEntry.of(result, finished=finished.timestamp())
        script_keys += [
            keys.catalog_minute(str(int(entry.finished // 60))),
            keys.CATALOG_RULES,
            keys.CATALOG_CATEGORIES,
            keys.CATALOG,
            *(keys.catalog_term(t) for t in catalog_terms(result)),
        ]
        args: list[Any] = [result.id, result.status.value, stored_json, verdict]
        args += [self.result_ttl_s]
        args += ["" if v is None else repr(float(v)) for v in values]
        args += [repr(entry.finished), LATENCY_FIELDS]
        args += [entry.encode(), repr(entry.finished - self.result_ttl_s)]
        args += [latency_bucket(timings.total_s)]
        args += [json.dumps(list(entry.rules)), json.dumps(list(entry.categories))]
        stored = int(self._finish(keys=script_keys, args=args)) == 1
        if stored and self.sink is not None:
            raw = (
                request.model_dump_json()
                if request is not None
                else self.redis.hget(keys.episode(result.id), RecordField.request)
            )
            if raw is not None:
                self.sink.write(raw, args[2])
        return stored

    # ------------------------------------------------------------------ interactive steps

    def add_step(self, episode_id: str, step: Step) -> Step:
        """Number the step and append it; actions of one episode are serialized upstream."""
        number = int(self.redis.hincrby(keys.episode(episode_id), RecordField.steps, 1))
        step = step.model_copy(update={"step": number})
        pipe = self.redis.pipeline(transaction=False)
        pipe.rpush(keys.steps(episode_id), dump_json(step))
        pipe.expire(keys.steps(episode_id), self.result_ttl_s + defaults.STEPS_TTL_MARGIN_S)
        pipe.execute()
        return step

    def steps(self, episode_id: str, *, last: int | None = None) -> list[Step]:
        start = -last if last else 0
        return [
            Step.model_validate_json(raw)
            for raw in self.redis.lrange(keys.steps(episode_id), start, -1)
        ]

    def reply(
        self, key: str, *, status: int = 200, body: Any = None, message: str | None = None
    ) -> None:
        """Answer a request the API is blocking on (`key`: see `keys.reply`)."""
        answer = {"status": status, "body": body, "message": message}
        payload = json.dumps(answer)
        if "\\ud" in payload:  # maybe a lone surrogate, which the API could not send (dump_json)
            payload = json.dumps(_without_surrogates(answer))
        pipe = self.redis.pipeline()
        pipe.rpush(key, payload)
        pipe.expire(key, defaults.REPLY_TTL_S)
        pipe.execute()

    # ------------------------------------------------------------------ reading

    def get(self, episode_id: str) -> EpisodeRecord | None:
        raw = self.redis.hgetall(keys.episode(episode_id))
        return _record(episode_id, raw) if raw else None

    def get_many(self, episode_ids: Sequence[str]) -> list[EpisodeRecord | None]:
        pipe = self.redis.pipeline(transaction=False)
        for episode_id in episode_ids:
            pipe.hgetall(keys.episode(episode_id))
        return [
            _record(eid, raw) if raw else None
            for eid, raw in zip(episode_ids, pipe.execute(), strict=True)
        ]

    def live_summaries(self) -> list[EpisodeSummary]:
        """The started, non-terminal episodes, without their (possibly large) requests:
        what the janitors scan every few seconds. Queued ones are left out in Redis (ZDIFF),
        never read."""
        ids = [_text(x) for x in self.redis.zdiff([keys.ACTIVE, keys.QUEUED])]
        pipe = self.redis.pipeline(transaction=False)
        for episode_id in ids:
            pipe.hmget(keys.episode(episode_id), *SUMMARY_FIELDS)
        summaries = []
        for episode_id, values in zip(ids, pipe.execute(), strict=True):
            status, worker, mode, created, last_action = (
                _text(v) if v is not None else None for v in values
            )
            if status is None or status in TERMINAL or status == EpisodeStatus.queued.value:
                continue
            summaries.append(
                EpisodeSummary(
                    id=episode_id,
                    status=EpisodeStatus(status),
                    worker=worker,
                    interactive=mode == EpisodeMode.interactive.value,
                    created=float(created or 0),
                    last_action=float(last_action or created or 0),
                )
            )
        return summaries

    def public(self, episode_id: str) -> EpisodeResult | None:
        """What `get(...).public()` gives, reading only the result once there is one: a
        trainer's read of an ended episode neither moves nor decodes its request."""
        raw = self.redis.hget(keys.episode(episode_id), RecordField.result)
        if raw:
            return EpisodeResult.model_validate_json(raw)
        record = self.get(episode_id)
        return record.public() if record is not None else None

    def status(self, episode_id: str) -> EpisodeStatus | None:
        raw = self.redis.hget(keys.episode(episode_id), RecordField.status)
        return EpisodeStatus(_text(raw)) if raw else None

    def active_ids(self) -> list[str]:
        return [_text(x) for x in self.redis.zrange(keys.ACTIVE, 0, -1)]

    def queued_count(self) -> int:
        """Episodes not started yet: what the queue bound counts."""
        return int(self.redis.zcard(keys.QUEUED))

    def active_count(self) -> int:
        """Episodes not ended yet (queued or running)."""
        return int(self.redis.zcard(keys.ACTIVE))

    def queued_ids(self, *, older_than_s: float) -> list[str]:
        """Episodes created over `older_than_s` ago and not started yet."""
        until = time.time() - older_than_s
        return [_text(x) for x in self.redis.zrangebyscore(keys.QUEUED, "-inf", until)]

    def drop_ids(self, episode_ids: Sequence[str]) -> None:
        """Take ids whose record is gone (expired) out of the live sets."""
        if episode_ids:
            pipe = self.redis.pipeline(transaction=False)
            pipe.zrem(keys.ACTIVE, *episode_ids)
            pipe.zrem(keys.QUEUED, *episode_ids)
            pipe.execute()

    # ------------------------------------------------------------------ workers

    def heartbeat(self, worker: str, *, host: str) -> None:
        pipe = self.redis.pipeline(transaction=False)
        pipe.zadd(keys.WORKERS, {worker: time.time()})
        pipe.hset(keys.WORKER_HOSTS, worker, host)
        pipe.execute()

    def forget_worker(self, worker: str) -> None:
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrem(keys.WORKERS, worker)
        pipe.hdel(keys.WORKER_HOSTS, worker)
        pipe.hdel(keys.WORKER_PROBLEMS, worker)
        pipe.hdel(keys.WORKER_IMAGES, worker)
        pipe.execute()

    def forget_workers_older_than(self, age_s: float) -> None:
        for worker in self.redis.zrangebyscore(keys.WORKERS, "-inf", time.time() - age_s):
            self.forget_worker(_text(worker))

    def report_problem(self, worker: str, problem: str | None) -> None:
        """A worker that is alive but cannot run episodes (Docker down, image missing)."""
        if problem:
            self.redis.hset(keys.WORKER_PROBLEMS, worker, problem)
        else:
            self.redis.hdel(keys.WORKER_PROBLEMS, worker)

    def worker_problems(self, workers: Sequence[str]) -> dict[str, str]:
        if not workers:
            return {}
        values = self.redis.hmget(keys.WORKER_PROBLEMS, list(workers))
        return {w: _text(v) for w, v in zip(workers, values, strict=True) if v}

    def worker_host(self, worker: str) -> str | None:
        host = self.redis.hget(keys.WORKER_HOSTS, worker)
        return _text(host) if host else None

    def live_workers(self, ttl_s: float) -> list[str]:
        return [
            _text(x) for x in self.redis.zrangebyscore(keys.WORKERS, time.time() - ttl_s, "+inf")
        ]

    def dead_workers(self, ttl_s: float) -> list[str]:
        return [
            _text(x) for x in self.redis.zrangebyscore(keys.WORKERS, "-inf", time.time() - ttl_s)
        ]

    # ------------------------------------------------------------------ a host's capacity

    def reserve(
        self,
        host: str,
        episode_id: str,
        share: Share,
        *,
        budget: tuple[int, int],
        left_s: float = defaults.RESERVE_LEFT_S,
    ) -> bool:
        """Take `share` of `host`'s `budget` (millicpus, memory MiB) for an episode, if it
        is first in the host's line of waiting episodes and it fits beside the shares held
        (or nothing is held); True when taken or held already, else it stands in line (see
        `_RESERVE`) until taken or `leave_line`, or silent for `left_s`."""
        args: list[str | int | float] = [episode_id, share.worker, share.millicpus]
        args += [share.memory_mb, *budget, defaults.RESERVATIONS_TTL_S, left_s]
        line = [keys.reservations(host), keys.waiting(host), keys.waiting_asked(host)]
        return bool(self._reserve(keys=line, args=args) == 1)

    def ahead_in_line(self, host: str, episode_id: str) -> int | None:
        """How many episodes wait before this one for a share (None: it is not in line)."""
        rank: int | None = self.redis.zrank(keys.waiting(host), episode_id)  # type: ignore[assignment]
        return rank

    def leave_line(self, host: str, episode_id: str) -> None:
        """Stop waiting for a share (the episode ended, or waited as long as it may)."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrem(keys.waiting(host), episode_id)
        pipe.hdel(keys.waiting_asked(host), episode_id)
        pipe.execute()

    def release(self, host: str, episode_id: str) -> None:
        """Give an episode's share back (whoever took it; nothing when it holds none)."""
        self.redis.hdel(keys.reservations(host), episode_id)

    def release_of(self, host: str, worker: str, episode_ids: Sequence[str] | None = None) -> int:
        """Give back what `worker` holds (of `episode_ids`, or all of it): it died or stopped."""
        if episode_ids is None:
            episode_ids = [i for i, s in self.reservations(host).items() if s.worker == worker]
        if not episode_ids:
            return 0
        return int(self._release_of(keys=[keys.reservations(host)], args=[worker, *episode_ids]))

    def reservations(self, host: str) -> dict[str, Share]:
        """The shares `host`'s episodes hold: episode id → share."""
        out: dict[str, Share] = {}
        for episode_id, raw in self.redis.hgetall(keys.reservations(host)).items():
            worker, millicpus, memory_mb = json.loads(raw)
            out[_text(episode_id)] = Share(str(worker), int(millicpus), int(memory_mb))
        return out

    # ------------------------------------------------------------------ image registry

    def publish_images(self, worker: str, images: Mapping[str, str | None]) -> None:
        """What a worker can run now: image name → None when it can, else why not.

        Workers call this as they re-check their images (an image can vanish after start).
        A claim counts only while its worker's heartbeat is fresh, so it dies with it.
        """
        report = ImageReport(at=time.time(), images=dict(images))
        self.redis.hset(keys.WORKER_IMAGES, worker, report.encode())

    def unrunnable_images(self, names: Iterable[str], *, ttl_s: float) -> dict[str, str] | None:
        """The image names no live worker can run, each with every worker's reason; None
        when no worker is live.

        A live worker runs an image when it reports no problem and its image report (if
        it sent one within `ttl_s`) lists the image as runnable; a healthy worker without a
        fresh report checked all its images when it started. No live worker at all says
        nothing about images (they may be starting): that is `/readyz`'s to report.
        """
        wanted = list(dict.fromkeys(names))
        workers = self.live_workers(ttl_s)
        if not workers:
            return None
        if not wanted:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        pipe.hmget(keys.WORKER_PROBLEMS, workers)
        pipe.hmget(keys.WORKER_IMAGES, workers)
        problem_values, report_values = pipe.execute()
        reasons: dict[str, list[str]] = {name: [] for name in wanted}
        runnable: set[str] = set()
        now = time.time()
        for worker, problem, raw in zip(workers, problem_values, report_values, strict=True):
            if problem:
                for name in wanted:
                    reasons[name].append(f"{worker}: {_text(problem)}")
                continue
            report = ImageReport.decode(_text(raw)) if raw else None
            if report is None or now - report.at > ttl_s:
                runnable.update(wanted)  # checked at start; no newer word
                break
            for name in wanted:
                if name not in report.images:
                    reasons[name].append(f"{worker}: not configured on this worker")
                elif report.images[name] is None:
                    runnable.add(name)
                else:
                    reasons[name].append(f"{worker}: {report.images[name]}")
        return {name: "; ".join(why) for name, why in reasons.items() if name not in runnable}

    def stats(self) -> tuple[dict[str, int], dict[str, dict[str, float]]]:
        pipe = self.redis.pipeline(transaction=False)
        pipe.hgetall(keys.VERDICTS)
        for metric in LATENCY_METRICS:
            pipe.hgetall(keys.latency(metric))
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
        self.redis.hincrbyfloat(keys.COUNTERS, _counter_field(name, labels), amount)

    def extra_metrics(self) -> list[Any]:
        from prometheus_client.core import CounterMetricFamily

        families: dict[str, Any] = {}
        for field, value in self.redis.hgetall(keys.COUNTERS).items():
            name, labels = _counter_parts(_text(field))
            family = families.get(name)
            if family is None:
                family = families[name] = CounterMetricFamily(
                    name, name, labels=[k for k, _ in labels]
                )
            family.add_metric([v for _, v in labels], float(value))
        return list(families.values())


class ReplyWaiter:
    """Blocks on reply keys (see `keys.reply`) over a client of its own.

    Its socket timeout outlasts the longest wait it serves: with redis-py's default of 5 s,
    every wait longer than that ended as a Redis error (a 503) while the worker went on
    running the action. A dead Redis still ends a wait at once (the connection closes).
    """

    def __init__(self, url: str, *, longest_wait_s: float) -> None:
        self.longest_wait_s = longest_wait_s
        self.redis = aioredis.Redis.from_url(
            url,
            socket_timeout=longest_wait_s + defaults.BLOCKING_SOCKET_MARGIN_S,
            health_check_interval=defaults.REDIS_HEALTH_CHECK_S,
        )

    async def wait(self, key: str, timeout_s: float) -> dict[str, Any] | None:
        """The reply pushed to `key` (see `EpisodeStore.reply`), or None after `timeout_s`."""
        if timeout_s > self.longest_wait_s:
            raise ValueError(
                f"a wait of {timeout_s} s is longer than this waiter's {self.longest_wait_s} s"
            )
        popped = await self.redis.blpop([key], timeout=timeout_s)
        if popped is None:
            return None
        reply: dict[str, Any] = json.loads(popped[1])
        return reply

    async def close(self) -> None:
        await self.redis.aclose()


OUTCOME_FIELDS = [RecordField.status, RecordField.result]  # what a wait reads


async def read_outcome(client: aioredis.Redis, episode_id: str) -> tuple[EpisodeStatus | None, Any]:
    """An episode's status and its result's JSON (None until it ended) over an async client:
    what the API's waits check at each wake-up, without a thread or the whole record.
    The status is None when there is no record."""
    return _outcome(await client.hmget(keys.episode(episode_id), OUTCOME_FIELDS))


async def read_outcomes(
    client: aioredis.Redis, episode_ids: Sequence[str]
) -> list[tuple[EpisodeStatus | None, Any]]:
    """`read_outcome` of many episodes in one round trip, in order."""
    pipe = client.pipeline(transaction=False)
    for episode_id in episode_ids:
        pipe.hmget(keys.episode(episode_id), OUTCOME_FIELDS)
    return [_outcome(raw) for raw in await pipe.execute()]


def _outcome(raw: list[Any]) -> tuple[EpisodeStatus | None, Any]:
    status, result = raw
    return (EpisodeStatus(_text(status)) if status else None), result


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _record(episode_id: str, raw: dict[Any, Any]) -> EpisodeRecord | None:
    fields = {_text(k): _text(v) for k, v in raw.items()}
    if RecordField.request not in fields:  # a record being created or already half-expired
        return None
    result = fields.get(RecordField.result)
    last_action = fields.get(RecordField.last_action)
    finished = fields.get(RecordField.finished)
    interactive = fields.get(RecordField.mode) == EpisodeMode.interactive.value
    return EpisodeRecord(
        id=episode_id,
        status=EpisodeStatus(fields[RecordField.status]),
        request=EpisodeCreate.model_validate_json(fields[RecordField.request]),
        created=float(fields.get(RecordField.created, "0")),
        result=EpisodeResult.model_validate_json(result) if result else None,
        worker=fields.get(RecordField.worker),
        host=fields.get(RecordField.host),
        container=fields.get(RecordField.container),
        last_action=float(last_action) if last_action else None,
        steps=int(fields.get(RecordField.steps, "0")),
        finished=float(finished) if finished else None,
        sandbox=SandboxState.decode(fields) if interactive else None,
    )
