"""Idempotency keys from a request's `Idempotency-Key` header, for the routes that queue
episodes (`service.queueing.dedup_key` is what a key does).

A batch's header names the call: its i-th episode's key is `<header>/<i>`, so a retry of
the whole batch gets its episodes back, and two equal episodes of one batch run twice.
A key in an episode's own body wins over the header's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Annotated

from fastapi import Header, Query

from proctor.models import EpisodeCreate

MAX_KEY_CHARS = 200  # a batch index is appended: within the field's 256

IdempotencyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=MAX_KEY_CHARS,
        description="a retry of this call sends the same key and gets the same episodes "
        "(one-shot, same content, within PROCTOR_DEDUP_TTL_S); without one, every call runs",
    ),
]

ShareIdentical = Annotated[
    bool,
    Query(
        description="content dedup: identical one-shot requests that ask for it share one "
        "episode within PROCTOR_DEDUP_TTL_S (a trainer's URL can say so where its client "
        "sends no key)",
    ),
]


def keyed(
    request: EpisodeCreate, key: str | None, *, share_identical: bool = False
) -> EpisodeCreate:
    """The request with `key`, unless it has its own (or there is none); sharing identical
    ones if the call asked for it."""
    update: dict[str, object] = {}
    if key is not None and request.idempotency_key is None:
        update["idempotency_key"] = key
    if share_identical:
        update["share_identical"] = True
    return request.model_copy(update=update) if update else request


def keyed_batch(
    requests: Sequence[EpisodeCreate], key: str | None, *, share_identical: bool = False
) -> list[EpisodeCreate]:
    """The i-th request keyed `<key>/<i>` (see the module docstring)."""
    return [
        keyed(r, None if key is None else f"{key}/{i}", share_identical=share_identical)
        for i, r in enumerate(requests)
    ]


def body_key(body: str) -> str:
    """A call's key from its body, for a trainer whose client retries the same body and
    sends no key (OpenRLHF's): a digest, so an equal body is the same call."""
    return "body:" + hashlib.sha256(body.encode()).hexdigest()
