"""A prefetch's record in Redis: what the API asked of which hosts, and each host's
progress through it, written by the host's worker as it pulls (`workers/prefetch.py`)."""

from __future__ import annotations

import json
import time

import redis

from core import keys
from core.defaults import PREFETCH_TTL_S
from proctor.prefetch import HostPull, PrefetchPublic, PullState

_IMAGES = "images"
_HOSTS = "hosts"
_CREATED = "created"


def _field(host: str, image: str) -> str:
    return f"s:{host}|{image}"


def create(client: redis.Redis, prefetch_id: str, images: list[str], hosts: list[str]) -> None:
    key = keys.prefetch(prefetch_id)
    pipe = client.pipeline(transaction=True)
    pipe.hset(
        key,
        mapping={
            _IMAGES: json.dumps(images),
            _HOSTS: json.dumps(hosts),
            _CREATED: repr(time.time()),
        },
    )
    pipe.expire(key, PREFETCH_TTL_S)
    pipe.execute()


def images_of(client: redis.Redis, prefetch_id: str) -> list[str]:
    raw = client.hget(keys.prefetch(prefetch_id), _IMAGES)
    return list(json.loads(raw)) if raw else []


def record(
    client: redis.Redis,
    prefetch_id: str,
    *,
    host: str,
    image: str,
    state: PullState,
    detail: str = "",
) -> None:
    value = json.dumps({"state": state.value, "detail": detail[:1000]})
    client.hset(keys.prefetch(prefetch_id), _field(host, image), value)


def read(client: redis.Redis, prefetch_id: str) -> PrefetchPublic | None:
    raw = client.hgetall(keys.prefetch(prefetch_id))
    fields = {
        (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
        for k, v in raw.items()
    }
    if _IMAGES not in fields:
        return None
    images: list[str] = json.loads(fields[_IMAGES])
    hosts: list[str] = json.loads(fields[_HOSTS])
    pulls = []
    for host in hosts:
        for image in images:
            entry = json.loads(fields.get(_field(host, image)) or '{"state": "queued"}')
            pulls.append(
                HostPull(
                    host=host,
                    image=image,
                    state=PullState(entry["state"]),
                    detail=entry.get("detail", ""),
                )
            )
    counts: dict[str, int] = {}
    for pull in pulls:
        counts[pull.state.value] = counts.get(pull.state.value, 0) + 1
    done = sum(pull.state.done for pull in pulls)
    return PrefetchPublic(
        id=prefetch_id,
        images=images,
        hosts=hosts,
        total=len(pulls),
        done=done,
        complete=done == len(pulls),
        counts=counts,
        pulls=pulls,
    )
