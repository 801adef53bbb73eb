"""An interactive action a worker takes after the API stopped being able to await its whole
run is refused at once (503), not run: a client retrying the API's 503 would otherwise
have it run twice. One taken in time runs."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from workers import interactive, jobs, runtime


class Store:
    def __init__(self) -> None:
        self.replies: list[tuple[str, int, str]] = []

    def reply(self, key: str, *, status: int, message: str) -> None:
        self.replies.append((key, status, message))


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Store]:
    store = Store()
    monkeypatch.setattr(runtime, "current", lambda: SimpleNamespace(store=store))
    calls: list[str] = []

    def act(rt: Any, episode_id: str, action: Any, reply_key: str) -> None:
        calls.append(episode_id)

    monkeypatch.setattr(interactive, "run_action", act)
    return calls, store


def test_an_action_taken_after_its_start_by_time_is_refused_not_run(
    ran: tuple[list[str], Store],
) -> None:
    calls, store = ran
    jobs.run_action("ep_1", {"type": "bash", "command": "echo"}, "reply:1", time.time() - 1)
    assert calls == []
    assert [(key, status) for key, status, _ in store.replies] == [("reply:1", 503)]


@pytest.mark.parametrize("start_by", [None, time.time() + 3600])
def test_an_action_taken_in_time_runs(ran: tuple[list[str], Store], start_by: float | None) -> None:
    calls, store = ran
    jobs.run_action("ep_1", {"type": "bash", "command": "echo"}, "reply:1", start_by)
    assert calls == ["ep_1"] and store.replies == []
