"""The janitor removes the container of an episode that ended elsewhere (a cancel, a
deadline) — never one the episode let go of meanwhile, which a pool may have handed on."""

from __future__ import annotations

from typing import Any

from proctor.models import EpisodeStatus
from tests.unit.workers.janitors import janitor_of
from workers.janitor import Janitor


class Store:
    """The two store calls `release_ended` makes; `status` plays the worker's side too."""

    def __init__(self, status: EpisodeStatus, on_read: Any = None) -> None:
        self._status, self.on_read = status, on_read
        self.released: list[str] = []

    def status(self, episode_id: str) -> EpisodeStatus:
        if self.on_read is not None:
            self.on_read()
        return self._status

    def release(self, host: str, episode_id: str) -> None:
        self.released.append(episode_id)


class Engine:
    def __init__(self) -> None:
        self.removed: list[str] = []

    def remove(self, container_id: str) -> None:
        self.removed.append(container_id)


def janitor(store: Store, holding: dict[str, str]) -> tuple[Janitor, Engine]:
    engine = Engine()
    return janitor_of(store, engine, holding, worker="w"), engine


def test_the_container_of_an_episode_cancelled_while_it_runs_is_removed() -> None:
    holding = {"ep": "c1"}
    store = Store(EpisodeStatus.cancelled)
    found, engine = janitor(store, holding)
    assert found.containers is not None
    found.containers.release_ended()
    assert (engine.removed, holding, store.released) == (["c1"], {}, ["ep"])


def test_a_container_the_episode_let_go_of_while_its_end_was_read_stays() -> None:
    holding = {"ep": "c1"}
    # the episode ends normally between the janitor's look at `holding` and its read
    store = Store(EpisodeStatus.completed, on_read=lambda: holding.pop("ep"))
    found, engine = janitor(store, holding)
    assert found.containers is not None
    found.containers.release_ended()
    assert (engine.removed, store.released) == ([], [])
