"""A host's capacity shares: what each running episode holds of its host's budget
(`reservations:{host}`), and the line of episodes waiting for one (`waiting:{host}`,
`waiting-asked:{host}`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import redis

from core import defaults, keys
from core.store.encoding import as_text
from core.store.scripts import BoundScript, LuaScript

# Take an episode's share of its host's budget, first come first served: the episodes that
# wait stand in line (a sorted set by arrival), and only the first in line may take a share,
# when it fits the budget beside the shares held (a host holding nothing takes any one
# episode: admission let it in). Without the line, a worker that just gave a share back
# takes it again before any waiter polls, and a waiter can starve past its wait (seen: 16 s
# of 20 with 8 workers on 4 shares). A waiter that stopped asking (its worker died) leaves
# the line once it reaches its head. ARG.ttl: the keys'; ARG.left_s: how long a silent
# waiter keeps its place. → 1 taken (or held already), 0 not yet
RESERVE = LuaScript(
    name="reserve",
    keys=("reservations", "line", "asked"),
    args=(
        "episode",
        "worker",
        "millicpus",
        "memory_mb",
        "budget_millicpus",
        "budget_memory_mb",
        "ttl",
        "left_s",
    ),
    body="""
local episode = ARG.episode
local share = cjson.encode({ARG.worker, tonumber(ARG.millicpus), tonumber(ARG.memory_mb)})
local ttl = tonumber(ARG.ttl)
local taken = redis.call('HEXISTS', KEY.reservations, episode) == 1
if not taken then
  local clock = redis.call('TIME')
  local now = tonumber(clock[1]) + tonumber(clock[2]) / 1e6
  redis.call('ZADD', KEY.line, 'NX', now, episode)
  redis.call('HSET', KEY.asked, episode, now)
  redis.call('EXPIRE', KEY.line, ttl)
  redis.call('EXPIRE', KEY.asked, ttl)
  while true do
    local head = redis.call('ZRANGE', KEY.line, 0, 0)[1]
    if head == episode then break end
    if tonumber(redis.call('HGET', KEY.asked, head) or 0) >= now - tonumber(ARG.left_s) then
      return 0
    end
    redis.call('ZREM', KEY.line, head)
    redis.call('HDEL', KEY.asked, head)
  end
  local cpus, memory, held = 0, 0, 0
  for _, raw in ipairs(redis.call('HVALS', KEY.reservations)) do
    local r = cjson.decode(raw)
    cpus, memory, held = cpus + r[2], memory + r[3], held + 1
  end
  if held > 0 and (cpus + tonumber(ARG.millicpus) > tonumber(ARG.budget_millicpus)
                   or memory + tonumber(ARG.memory_mb) > tonumber(ARG.budget_memory_mb)) then
    return 0
  end
  redis.call('ZREM', KEY.line, episode)
  redis.call('HDEL', KEY.asked, episode)
end
redis.call('HSET', KEY.reservations, episode, share)
redis.call('EXPIRE', KEY.reservations, ttl)
return 1
""",
)

# Give back the shares one worker holds among the episodes named (what a worker that died
# held; a share it no longer holds stays). → how many were given back
RELEASE_OF = LuaScript(
    name="release_of",
    keys=("reservations",),
    args=("worker",),
    rest_args="episodes",
    body="""
local n = 0
for _, episode in ipairs(ARG.episodes) do
  local raw = redis.call('HGET', KEY.reservations, episode)
  if raw and cjson.decode(raw)[1] == ARG.worker then
    redis.call('HDEL', KEY.reservations, episode)
    n = n + 1
  end
end
return n
""",
)


@dataclass(frozen=True, slots=True)
class Share:
    """What one running episode holds of its host's budget (see `EpisodeStore.reserve`)."""

    worker: str  # the worker process that took it
    millicpus: int
    memory_mb: int


class HostShares:
    """Taking and giving back shares (`EpisodeStore.reserve`, `.release`, …)."""

    redis: redis.Redis
    _reserve: BoundScript
    _release_of: BoundScript

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
        `RESERVE`) until taken or `leave_line`, or silent for `left_s`."""
        taken = self._reserve(
            keys={
                "reservations": keys.reservations(host),
                "line": keys.waiting(host),
                "asked": keys.waiting_asked(host),
            },
            args={
                "episode": episode_id,
                "worker": share.worker,
                "millicpus": share.millicpus,
                "memory_mb": share.memory_mb,
                "budget_millicpus": budget[0],
                "budget_memory_mb": budget[1],
                "ttl": defaults.RESERVATIONS_TTL_S,
                "left_s": left_s,
            },
        )
        return bool(taken == 1)

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
        given = self._release_of(
            keys={"reservations": keys.reservations(host)},
            args={"worker": worker},
            rest_args=episode_ids,
        )
        return int(given)

    def reservations(self, host: str) -> dict[str, Share]:
        """The shares `host`'s episodes hold: episode id → share."""
        out: dict[str, Share] = {}
        for episode_id, raw in self.redis.hgetall(keys.reservations(host)).items():
            worker, millicpus, memory_mb = json.loads(raw)
            out[as_text(episode_id)] = Share(str(worker), int(millicpus), int(memory_mb))
        return out
