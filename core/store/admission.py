"""Admission: the records of a batch created in one atomic step, with dedup and the queue
bounds (`CREATE`), or one record added to a pipeline without either (`add`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from core import defaults, keys
from core.store.encoding import as_text
from core.store.records import RecordField, new_episode_id
from core.store.scripts import BoundScript, LuaScript
from proctor.models import EpisodeCreate, EpisodeStatus

# Dedup, the queue bounds and the records of a whole batch in one step, so that concurrent
# submissions can neither run identical requests twice nor overshoot a bound. Two bounds:
# the queue's depth, and (when set) the wait of the batch's first episode, when it would
# start: what is queued ahead of it times the mean gap between two ends while episodes
# waited throughout (the drain rate, core/store/pace.py; Little's law). A batch is admitted
# whole when the queue ahead of it is short and refused whole when not, whatever its size
# (judged by its last episode, a trainer's batch of 64-512 was refused by any queue at all).
# Until episodes have waited, a worker's mean time on an episode over the live workers
# stands in (it misses what a worker spends between episodes); until an episode has ended
# only the depth bound holds.
# ARG: depth bound, wait bound (s, 0: none), dedup ttl, episode key prefix, live since
# (the heartbeat cutoff), then per request: fresh id, dedup key ('' when not shareable),
# created, record ttl, request json, mode.
# → {0, depth, wait ms, reopen ms} when a bound refuses the batch (nothing written; wait -1:
#   the depth bound; reopen: the drain time until a new submission would pass), else
#   {1, depth, id1, new1, id2, new2, …}: each request's episode, and whether it is new.
CREATE = LuaScript(
    name="create",
    keys=("active", "queued", "pace", "workers"),
    args=("max_queued", "max_wait_s", "dedup_ttl", "prefix", "live_since"),
    rest_args="requests",
    rest_fields=("id", "dedup", "created", "ttl", "request", "mode"),
    statuses=True,
    body="""
local prefix = ARG.prefix
local n = #ARG.requests
local ids, new, seen = {}, {}, {}
local fresh = 0
for i, r in ipairs(ARG.requests) do
  local dedup = r.dedup
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
    ids[i], new[i] = r.id, 1
    fresh = fresh + 1
    if dedup ~= '' then seen[dedup] = ids[i] end
  end
end
local depth = redis.call('ZCARD', KEY.queued)
if fresh > 0 then
  local bound, most = tonumber(ARG.max_queued), tonumber(ARG.max_wait_s)
  local full = depth + fresh > bound
  if full or (most > 0 and depth > 0) then
    -- the seconds the queue takes to drain by one episode, when known
    local pace = redis.call('HMGET', KEY.pace, 'gap', 'busy')
    local per = tonumber(pace[1])
    if not per and pace[2] then
      per = tonumber(pace[2])
        / math.max(redis.call('ZCOUNT', KEY.workers, ARG.live_since, '+inf'), 1)
    end
    if full then
      local reopen = per and (depth + 1 - bound) * per or 0
      return {0, depth, -1, math.floor(math.max(reopen, 0) * 1000)}
    end
    local wait = per and depth * per
    if wait and wait > most then
      return {0, depth, math.floor(wait * 1000), math.floor((wait - most) * 1000)}
    end
  end
end
-- each new episode notes how many were ahead of it, and when (Redis's clock): where it
-- leaves the queue, its wait per episode ahead measures the pace (pace.WAITED_LUA)
local clock = redis.call('TIME')
local admitted = clock[1] .. '.' .. string.format('%06d', tonumber(clock[2]))
local ahead = depth
for i, r in ipairs(ARG.requests) do
  if new[i] == 1 then
    local key = prefix .. ids[i]
    redis.call('HSET', key, 'request', r.request, 'status', QUEUED,
               'created', r.created, 'mode', r.mode, 'ahead', ahead, 'admitted', admitted)
    ahead = ahead + 1
    redis.call('EXPIRE', key, tonumber(r.ttl))
    redis.call('ZADD', KEY.active, r.created, ids[i])
    redis.call('ZADD', KEY.queued, r.created, ids[i])
    if r.dedup ~= '' then
      redis.call('SET', r.dedup, ids[i], 'EX', tonumber(ARG.dedup_ttl))
    end
  end
end
local out = {1, depth + fresh}
for i = 1, n do
  out[#out + 1] = ids[i]
  out[#out + 1] = new[i]
end
return out
""",
)


@dataclass(frozen=True, slots=True)
class Admission:
    """What creating a batch did: each request's episode (new, or an identical one's)."""

    ids: list[str]
    new: list[bool]
    depth: int  # episodes queued after the call; at refusal, before it
    refused: bool  # a queue bound was reached: nothing was written
    wait_s: float | None = None  # refused by the wait bound: its first episode's wait
    reopen_s: float = 0.0  # refused: by the drain rate, when a new submission would pass


class EpisodeAdmission:
    """Creating episode records (`EpisodeStore.create`, `.add`)."""

    redis: redis.Redis
    result_ttl_s: int
    _create: BoundScript

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
        """Create the records of a batch in one atomic step (see `CREATE`).

        The wait bound counts the workers heard from within `worker_ttl_s` as live.
        A request with a dedup key shares the episode of an identical one (in the batch or
        already stored) unless that one failed or was cancelled. The caller enqueues the new
        ones afterwards; should it die in between, the janitor ends them (no job).
        """
        requests_args = []
        for request, dedup in zip(requests, dedup_keys, strict=True):
            fields = self.create_fields(request)
            requests_args.append(
                {
                    "id": new_episode_id(),
                    "dedup": dedup or "",
                    "created": fields[RecordField.created],
                    "ttl": self.record_ttl_s(request),
                    "request": fields[RecordField.request],
                    "mode": fields[RecordField.mode],
                }
            )
        reply = self._create(
            keys={
                "active": keys.ACTIVE,
                "queued": keys.QUEUED,
                "pace": keys.PACE,
                "workers": keys.WORKERS,
            },
            args={
                "max_queued": max_queued,
                "max_wait_s": max_wait_s,
                "dedup_ttl": max(dedup_ttl_s, 1),
                "prefix": keys.EPISODE_PREFIX,
                "live_since": time.time() - worker_ttl_s,
            },
            rest_args=requests_args,
        )
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
            ids=[as_text(x) for x in pairs[0::2]],
            new=[int(x) == 1 for x in pairs[1::2]],
            depth=int(reply[1]),
            refused=False,
        )
