"""Dedup covers retries, not samples: which requests share an episode's key."""

from __future__ import annotations

from proctor.models import EpisodeCreate, EpisodeMode
from service.idempotency import body_key, keyed, keyed_batch
from service.queueing import dedup_key

REQUEST = EpisodeCreate.model_validate(
    {
        "task": {"tests": {"files": {"test_x.py": "def test_x(): pass"}}},
        "solution": {"files": {"x.py": ""}},
    }
)


def test_without_a_key_or_the_ask_a_request_shares_nothing() -> None:
    assert dedup_key(REQUEST) is None
    assert dedup_key(REQUEST.model_copy()) is None


def test_a_retry_with_the_same_key_shares_and_another_key_does_not() -> None:
    first = dedup_key(keyed(REQUEST, "call-1"))
    assert first is not None and first == dedup_key(keyed(REQUEST, "call-1"))
    assert dedup_key(keyed(REQUEST, "call-2")) != first
    # the same key on a different request is not that request's answer
    other = REQUEST.model_copy(update={"metadata": {"n": "2"}})
    assert dedup_key(keyed(other, "call-1")) != first


def test_a_key_in_the_body_wins_over_the_header() -> None:
    own = REQUEST.model_copy(update={"idempotency_key": "mine"})
    assert keyed(own, "header").idempotency_key == "mine"


def test_content_dedup_when_asked_for() -> None:
    shared = keyed(REQUEST, None, share_identical=True)
    assert dedup_key(shared) is not None and dedup_key(shared) == dedup_key(shared.model_copy())
    # and only with requests that asked for it too
    assert dedup_key(REQUEST) is None


def test_a_batch_key_names_the_call_and_its_equal_episodes_run_apart() -> None:
    batch = keyed_batch([REQUEST, REQUEST], "call")
    assert [r.idempotency_key for r in batch] == ["call/0", "call/1"]
    assert dedup_key(batch[0]) != dedup_key(batch[1])
    assert [dedup_key(r) for r in keyed_batch([REQUEST, REQUEST], "call")] == [
        dedup_key(r) for r in batch
    ]
    assert keyed_batch([REQUEST], None) == [REQUEST]


def test_interactive_episodes_never_share() -> None:
    interactive = EpisodeCreate.model_validate(
        {
            "task": {"tests": {"files": {"test_x.py": "def test_x(): pass"}}},
            "mode": EpisodeMode.interactive,
            "idempotency_key": "k",
        }
    )
    assert dedup_key(interactive) is None


def test_a_body_key_is_a_digest_of_the_body() -> None:
    assert body_key('{"query": ["a"]}') == body_key('{"query": ["a"]}')
    assert body_key('{"query": ["a"]}') != body_key('{"query": ["b"]}')
