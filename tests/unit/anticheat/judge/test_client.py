"""The judge client's failure policy: a down, slow, garbled or busy judge never hangs an
episode and always says what happened. Mock transports stand in only for broken servers;
the working wire protocol is tested against a real server in tests/integration."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import httpx
import pytest
import redis

from anticheat.judge.client import (
    BREAKER_FAILURES,
    FailurePolicy,
    Judge,
    JudgeOutcome,
    JudgeSettings,
    JudgeStatus,
)
from anticheat.judge.prompt import JudgeVerdict
from core.store import EpisodeStore
from proctor.models import BashAction, Decision, EvidenceSource, ScreenVerdict

ACTION = BashAction(command="git log --all --oneline")
URL = "http://judge.test/v1"


def _settings(**overrides: object) -> JudgeSettings:
    base: dict[str, object] = {"url": URL, "model": "m", "action_budget_s": 2.0, "timeout_s": 5.0}
    base.update(overrides)
    return JudgeSettings(**base)  # type: ignore[arg-type]


class Counts:
    """The judge's `JudgeMetrics`, kept in memory (a worker passes its store)."""

    def __init__(self) -> None:
        self.values: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()

    def count(self, name: str, amount: float = 1.0, **labels: str) -> None:
        self.values[(name, tuple(sorted(labels.items())))] += amount


COUNTS = Counts()


def _calls(outcome: str) -> float:
    return COUNTS.values[("proctor_judge_calls", (("outcome", outcome),))]


def _completion(content: str) -> httpx.Response:
    return httpx.Response(
        200, json={"choices": [{"message": {"role": "assistant", "content": content}}]}
    )


def _judge(handler: Callable[[httpx.Request], httpx.Response], **overrides: object) -> Judge:
    return Judge(_settings(**overrides), transport=httpx.MockTransport(handler), metrics=COUNTS)


@pytest.mark.parametrize(
    ("policy", "decision"),
    [(FailurePolicy.fail_open, Decision.allow), (FailurePolicy.fail_closed, Decision.intercept)],
)
def test_down_server_applies_the_failure_policy(policy: FailurePolicy, decision: Decision) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    before = _calls("unreachable")
    with _judge(refuse, failure_policy=policy) as judge:
        outcome = judge.review_action(ACTION)
    assert outcome.status is JudgeStatus.unavailable
    assert outcome.decision is decision
    assert outcome.reason.startswith("unreachable")
    assert not outcome.cheat and outcome.evidence() is None
    assert _calls("unreachable") == before + 1


def test_trajectory_under_fail_open_is_allowed_and_says_why() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with _judge(refuse) as judge:
        outcome = judge.review_trajectory("task", "diff", [ACTION])
    assert (outcome.status, outcome.decision) == (JudgeStatus.unavailable, Decision.allow)
    assert outcome.status.value == "unavailable"  # what goes into CheatReport.judge


def test_a_failing_judge_is_left_alone_for_a_while() -> None:
    attempts: list[int] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        attempts.append(1)
        raise httpx.ConnectError("connection refused", request=request)

    with _judge(refuse) as judge:
        outcomes = [judge.review_action(BashAction(command=f"ls {i}")) for i in range(6)]
    reasons = [o.reason.split(":")[0] for o in outcomes]
    assert reasons == ["unreachable"] * BREAKER_FAILURES + ["circuit_open"] * 3
    assert len(attempts) == BREAKER_FAILURES
    assert all(o.decision is Decision.allow for o in outcomes)


def test_garbage_twice_is_unavailable_after_exactly_one_repair() -> None:
    seen: list[dict[str, object]] = []

    def babble(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return _completion("I am sorry, I cannot judge this. It looks fine to me!")

    before = _calls("invalid_output")
    with _judge(babble) as judge:
        outcome = judge.review_action(ACTION)
    assert outcome.status is JudgeStatus.unavailable
    assert outcome.reason.startswith("invalid_output")
    assert len(seen) == 2
    repair = seen[1]["messages"]
    assert isinstance(repair, list) and repair[-2]["role"] == "assistant"
    assert _calls("invalid_output") == before + 1


def test_repair_retry_recovers_a_verdict() -> None:
    answers = iter(
        [
            "Verdict: cheat, high confidence",
            json.dumps(
                {
                    "cheat": True,
                    "category": "vcs_history",
                    "confidence": 0.9,
                    "rationale": "all refs",
                }
            ),
        ]
    )

    def once_wrong(request: httpx.Request) -> httpx.Response:
        return _completion(next(answers))

    with _judge(once_wrong) as judge:
        outcome = judge.review_action(ACTION)
    assert outcome.status is JudgeStatus.verdict and outcome.repaired
    assert outcome.decision is Decision.intercept and outcome.cheat
    evidence = outcome.evidence(step=3)
    assert evidence is not None and evidence.source is EvidenceSource.judge
    assert (evidence.category, evidence.step) == ("vcs_history", 3)
    assert "all refs" in evidence.detail


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        (httpx.Response(500, text="CUDA out of memory"), "http_error"),
        (httpx.Response(200, text="<html>proxy login</html>"), "bad_response"),
        (httpx.Response(200, json={"choices": []}), "bad_response"),
        (httpx.Response(200, json={"choices": [{"message": {"content": None}}]}), "invalid_output"),
    ],
)
def test_broken_responses_are_unavailable(response: httpx.Response, reason: str) -> None:
    with _judge(lambda request: response, failure_policy=FailurePolicy.fail_closed) as judge:
        outcome = judge.review_action(ACTION)
    assert outcome.status is JudgeStatus.unavailable
    assert outcome.decision is Decision.intercept
    assert outcome.reason.startswith(reason)


def test_server_without_json_schema_support_gets_json_object() -> None:
    formats: list[object] = []

    def old_server(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        formats.append(body.get("response_format", {}).get("type"))
        if formats[-1] == "json_schema":
            return httpx.Response(422, json={"detail": "unsupported response_format"})
        return _completion(
            '{"cheat": false, "category": "none", "confidence": 0.9, '
            '"rationale": "reads its own log"}'
        )

    with _judge(old_server) as judge:
        first = judge.review_action(ACTION)
        judge.review_action(BashAction(command="git status"))
    assert first.status is JudgeStatus.verdict and first.decision is Decision.allow
    # stepped down once, and stayed down for the next review
    assert formats == ["json_schema", "json_object", "json_object"]


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A real socket that accepts connections and never answers: the slow judge."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in accepted:
            conn.close()
        listener.close()


def test_slow_judge_is_cut_off_at_the_action_budget(silent_server: str) -> None:
    settings = JudgeSettings(url=silent_server, model="m", action_budget_s=0.5, timeout_s=30.0)
    before = _calls("timeout")
    with Judge(settings, metrics=COUNTS) as judge:
        started = time.monotonic()
        outcome = judge.review_action(ACTION)
        elapsed = time.monotonic() - started
    assert outcome.status is JudgeStatus.unavailable and outcome.reason.startswith("timeout")
    assert outcome.decision is Decision.allow
    assert 0.4 < elapsed < 1.5
    assert _calls("timeout") == before + 1


def test_busy_judge_times_out_waiting_for_a_slot() -> None:
    entered, release = threading.Event(), threading.Event()

    def stuck(request: httpx.Request) -> httpx.Response:
        entered.set()
        release.wait(10)
        raise httpx.ReadTimeout("gave up", request=request)

    judge = _judge(stuck, max_concurrency=1, action_budget_s=0.3)
    first = threading.Thread(target=judge.review_action, args=(ACTION,))
    first.start()
    try:
        assert entered.wait(5)
        outcome = judge.review_action(BashAction(command="ls"))
        assert outcome.status is JudgeStatus.unavailable
        assert "no free judge slot" in outcome.reason
    finally:
        release.set()
        first.join(5)
        judge.close()


def test_disabled_judge_is_skipped_without_a_call() -> None:
    def never(request: httpx.Request) -> httpx.Response:
        raise AssertionError("a disabled judge must not call the server")

    judge = Judge(
        JudgeSettings(url="", failure_policy=FailurePolicy.fail_closed),
        transport=httpx.MockTransport(never),
    )
    action = judge.review_action(ACTION)
    trajectory = judge.review_trajectory("t", "d")
    per_task = _judge(never, failure_policy=FailurePolicy.fail_closed).review_action(
        ACTION, enabled=False
    )
    assert action.status is trajectory.status is per_task.status is JudgeStatus.skipped
    assert action.decision is Decision.intercept  # a review with no judge follows the policy
    assert trajectory.decision is Decision.allow  # no judge is no evidence of cheating
    assert per_task.decision is Decision.allow  # the trainer opted out of the judge


def test_outcome_resolves_the_rule_filters_review() -> None:
    rule = ScreenVerdict(decision=Decision.review, rule="git-log-all", category="vcs_history")
    verdict = JudgeVerdict(cheat=False, category="none", confidence=0.9, rationale="own log")
    outcome = JudgeOutcome(
        status=JudgeStatus.verdict, decision=Decision.allow, verdict=verdict, reason="own log"
    )
    screened = outcome.screen_verdict(rule)
    assert (screened.decision, screened.rule, screened.category) == (
        Decision.allow,
        "git-log-all",
        "vcs_history",
    )
    assert screened.reason == "judge verdict at confidence 0.90: own log"


@pytest.mark.redis
def test_reviews_are_counted_where_the_api_serves_them(redis_client: redis.Redis) -> None:
    store = EpisodeStore(redis_client, result_ttl_s=60)

    def served() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in store.extra_metrics()
            for s in family.samples
        }

    before = served()
    answer = '{"rationale": "own log", "cheat": false, "category": "none", "confidence": 0.9}'
    judge = Judge(
        _settings(), transport=httpx.MockTransport(lambda r: _completion(answer)), metrics=store
    )
    judge.review_action(ACTION)
    after = served()
    ok = ("proctor_judge_calls_total", (("outcome", "ok"),))
    timed = ("proctor_judge_timed_reviews_total", (("kind", "action"),))
    assert after[ok] == before.get(ok, 0.0) + 1
    assert after[timed] == before.get(timed, 0.0) + 1
