"""Reading episodes: records, statuses, the live sets, and the outcome the API's waits
check (`read_outcome`, over an async client)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import redis
import redis.asyncio as aioredis

from core import keys
from core.store.encoding import as_text
from core.store.records import (
    SUMMARY_FIELDS,
    EpisodeRecord,
    EpisodeSummary,
    RecordField,
    decode_record,
)
from core.store.scripts import TERMINAL
from proctor.models import EpisodeMode, EpisodeResult, EpisodeStatus


class EpisodeReads:
    """Reading records and the live sets (`EpisodeStore.get`, `.live_summaries`, …)."""

    redis: redis.Redis

    def get(self, episode_id: str) -> EpisodeRecord | None:
        raw = self.redis.hgetall(keys.episode(episode_id))
        return decode_record(episode_id, raw) if raw else None

    def get_many(self, episode_ids: Sequence[str]) -> list[EpisodeRecord | None]:
        pipe = self.redis.pipeline(transaction=False)
        for episode_id in episode_ids:
            pipe.hgetall(keys.episode(episode_id))
        return [
            decode_record(eid, raw) if raw else None
            for eid, raw in zip(episode_ids, pipe.execute(), strict=True)
        ]

    def live_summaries(self) -> list[EpisodeSummary]:
        """The started, non-terminal episodes, without their (possibly large) requests:
        what the janitors scan every few seconds. Queued ones are left out in Redis (ZDIFF),
        never read."""
        ids = [as_text(x) for x in self.redis.zdiff([keys.ACTIVE, keys.QUEUED])]
        pipe = self.redis.pipeline(transaction=False)
        for episode_id in ids:
            pipe.hmget(keys.episode(episode_id), *SUMMARY_FIELDS)
        summaries = []
        for episode_id, values in zip(ids, pipe.execute(), strict=True):
            status, worker, mode, created, last_action = (
                as_text(v) if v is not None else None for v in values
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
        return EpisodeStatus(as_text(raw)) if raw else None

    def active_ids(self) -> list[str]:
        return [as_text(x) for x in self.redis.zrange(keys.ACTIVE, 0, -1)]

    def queued_count(self) -> int:
        """Episodes not started yet: what the queue bound counts."""
        return int(self.redis.zcard(keys.QUEUED))

    def active_count(self) -> int:
        """Episodes not ended yet (queued or running)."""
        return int(self.redis.zcard(keys.ACTIVE))

    def queued_ids(self, *, older_than_s: float) -> list[str]:
        """Episodes created over `older_than_s` ago and not started yet."""
        until = time.time() - older_than_s
        return [as_text(x) for x in self.redis.zrangebyscore(keys.QUEUED, "-inf", until)]

    def drop_ids(self, episode_ids: Sequence[str]) -> None:
        """Take ids whose record is gone (expired) out of the live sets."""
        if episode_ids:
            pipe = self.redis.pipeline(transaction=False)
            pipe.zrem(keys.ACTIVE, *episode_ids)
            pipe.zrem(keys.QUEUED, *episode_ids)
            pipe.execute()


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
    return (EpisodeStatus(as_text(status)) if status else None), result
