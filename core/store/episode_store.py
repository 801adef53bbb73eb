"""`EpisodeStore`: the one handle a process holds on the store, made of its concerns (one
module each, see core/store/__init__.py) over one Redis client."""

from __future__ import annotations

import redis

from core import defaults
from core.sink import EpisodeSink
from core.store.admission import CREATE, EpisodeAdmission
from core.store.counters import Counters
from core.store.images import ImageReports
from core.store.lifecycle import ADVANCE, FINISH, EpisodeLifecycle
from core.store.reads import EpisodeReads
from core.store.shares import RELEASE_OF, RESERVE, HostShares
from core.store.steps import StepLog


class EpisodeStore(
    EpisodeAdmission,
    EpisodeLifecycle,
    StepLog,
    EpisodeReads,
    ImageReports,  # and the worker registry it reads
    HostShares,
    Counters,
):
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
        self._finish = FINISH.bind(client)
        self._advance = ADVANCE.bind(client)
        self._create = CREATE.bind(client)
        self._reserve = RESERVE.bind(client)
        self._release_of = RELEASE_OF.bind(client)
