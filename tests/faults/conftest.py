"""Fixtures of the fault-injection suite: a private stack per scenario, and the report.

Each scenario gets its own redis-server, API and workers (a fault leaves them in a state
no other scenario should inherit). The rows of all scenarios are printed as one table at
the end of the session and written to bench/results/faults.json.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.faults.ledger import RESULTS, Row, render, write
from tests.faults.stack import Stack

_ROWS: list[Row] = []


@pytest.fixture
def make_stack(
    docker_ready: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., Stack]]:
    """Start a stack with these settings (`PROCTOR_*` names); every one is ended after."""
    stacks: list[Stack] = []

    def make(**settings: str) -> Stack:
        stack = Stack(tmp_path_factory.mktemp("faults"), settings)
        stacks.append(stack)
        stack.start()
        return stack

    yield make
    for stack in stacks:
        stack.close()


@pytest.fixture
def report() -> Callable[[Row], None]:
    """Keep a scenario's row (call it before asserting, so failures are reported too)."""

    def keep(row: Row) -> None:
        _ROWS.append(row)
        write(_ROWS)

    return keep


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _ROWS:
        return
    terminalreporter.section("fault injection")
    terminalreporter.write_line(render(_ROWS))
    terminalreporter.write_line(f"written to {RESULTS}")
