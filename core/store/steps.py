"""An interactive episode's steps (`steps:{id}`), and the replies its worker pushes to the
API blocking on a request (`reply:{token}`, read by `ReplyWaiter`)."""

from __future__ import annotations

import json
from typing import Any

import redis
import redis.asyncio as aioredis

from core import defaults, keys
from core.store.encoding import dump_json, without_surrogates
from core.store.records import RecordField
from proctor.models import Step


class StepLog:
    """Appending and reading steps, and answering the API (`EpisodeStore.add_step`, …)."""

    redis: redis.Redis
    result_ttl_s: int

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
            payload = json.dumps(without_surrogates(answer))
        pipe = self.redis.pipeline()
        pipe.rpush(key, payload)
        pipe.expire(key, defaults.REPLY_TTL_S)
        pipe.execute()


class ReplyWaiter:
    """Blocks on reply keys (see `keys.reply`) over a client of its own.

    Its socket timeout outlasts the longest wait it serves: with redis-py's default of 5 s,
    every wait longer than that ended as a Redis error (a 503) while the worker went on
    running the action. A dead Redis still ends a wait at once (the connection closes).
    Each wait holds a connection until its reply: the pool holds as many as the waits an
    API process serves at once (redis-py's default of 100 refused the 101st of a batch's
    finishes, "Too many connections").
    """

    def __init__(
        self, url: str, *, longest_wait_s: float, max_waits: int = defaults.API_REDIS_CONNECTIONS
    ) -> None:
        self.longest_wait_s = longest_wait_s
        self.redis = aioredis.Redis.from_url(
            url,
            socket_timeout=longest_wait_s + defaults.BLOCKING_SOCKET_MARGIN_S,
            health_check_interval=defaults.REDIS_HEALTH_CHECK_S,
            max_connections=max_waits,
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
