"""A sandbox that stops between the engine's inspect and its stats read (the OOM killer took
its init) is evidence of the sandbox's end, not a failure of ours; a running sandbox whose
stats cannot be read at all still is ours."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from workers.sandbox.engine import Engine, SandboxError


class Api:
    """The two engine calls `usage` makes: states in turn, stats failing `failures` times."""

    def __init__(self, states: list[dict[str, Any]], failures: int) -> None:
        self.states, self.failures = states, failures

    def inspect_container(self, container_id: str) -> dict[str, Any]:
        return {"State": self.states.pop(0) if len(self.states) > 1 else self.states[0]}

    def stats(self, container_id: str, **_: Any) -> dict[str, Any]:
        if self.failures:
            self.failures -= 1
            raise requests.exceptions.JSONDecodeError("Expecting value", "", 0)
        return {"pids_stats": {"current": 3}, "memory_stats": {"usage": 10, "limit": 20}}


def engine(api: Api) -> Engine:
    made = Engine.__new__(Engine)  # no Docker client: the calls under test are the fake's
    made.api = api  # type: ignore[assignment]
    return made


RUNNING = {"Running": True, "OOMKilled": False}
OOM_STOPPED = {"Running": False, "OOMKilled": True, "ExitCode": 137}


def test_a_sandbox_that_stopped_under_the_stats_read_is_read_as_stopped() -> None:
    usage = engine(Api([RUNNING, OOM_STOPPED], failures=1)).usage("c" * 64)
    assert (usage.running, usage.oom_killed, usage.exit_code) == (False, True, 137)


def test_a_stats_read_that_fails_once_is_read_again() -> None:
    usage = engine(Api([RUNNING], failures=1)).usage("c" * 64)
    assert usage.running and usage.pids == 3 and usage.memory_limit == 20


def test_a_running_sandbox_whose_stats_never_answer_is_our_error() -> None:
    with pytest.raises(SandboxError, match="read the stats"):
        engine(Api([RUNNING], failures=5)).usage("c" * 64)
