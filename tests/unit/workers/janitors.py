"""A janitor on stand-ins for the store and the engine, for tests of its decisions."""

from __future__ import annotations

from typing import Any

from workers.janitor import Janitor


def janitor_of(store: Any, engine: Any, holding: dict[str, str], *, worker: str) -> Janitor:
    return Janitor(
        store,
        worker=worker,
        host="h",
        heartbeat_s=1,
        heartbeat_ttl_s=3,
        sweep_s=1,
        engine=engine,
        holding=holding,
    )
