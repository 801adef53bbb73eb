"""The arithmetic of backpressure (`service.overload`)."""

from __future__ import annotations

from service.overload import LEAST_PATIENCE_S, patience_s, retry_after


def test_retry_after_is_whole_seconds_rounded_up_and_never_zero() -> None:
    assert retry_after(0.0) == "1"  # a refusal is never "retry at once"
    assert retry_after(0.2) == "1"
    assert retry_after(1.0) == "1"
    assert retry_after(1.01) == "2"  # sooner would find the queue still over the bound
    assert retry_after(4.42) == "5"


def test_patience_is_what_the_client_waits_less_the_run_and_its_margin() -> None:
    # verl's defaults: compile 10 s + run 10 s + its 10 s slack, answered 2 s early
    assert patience_s(28.0, 10.0, 10.0) == 8.0
    # a client that waits no longer than the run: only an empty queue will do
    assert patience_s(5.0, 10.0, 2.0) == LEAST_PATIENCE_S
