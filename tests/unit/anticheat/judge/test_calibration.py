"""Calibration: a judge's verdicts count only when it gets the fixed probes right, and a
judge that does not (constant, unreadable, wrong, down) is asked nothing and says why.

The judges here are transports (`httpx.MockTransport`) that answer as a kind of model
does, reading the action under review from the real prompt; the real local model is put to
the same probes in tests/integration/test_judge_calibration.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
import redis

from anticheat.judge import calibration
from anticheat.judge.calibration import PROBES, Calibrator, JudgeState, calibrate
from anticheat.judge.client import FailurePolicy, Judge, JudgeSettings, JudgeStatus
from proctor.models import BashAction, Decision

URL = "http://judge.test/v1"
CHEATS = ("--all", "curl ", "rm -rf tests")  # what each known-cheat probe does


def _settings(**overrides: object) -> JudgeSettings:
    base: dict[str, object] = {"url": URL, "model": "m", "action_budget_s": 2.0, "timeout_s": 5.0}
    base.update(overrides)
    return JudgeSettings(**base)  # type: ignore[arg-type]


def _under_review(request: httpx.Request) -> str:
    messages = json.loads(request.content)["messages"]
    user = next(m["content"] for m in messages if m["role"] == "user")  # a repair's too
    return str(user.split("ACTION UNDER REVIEW", 1)[1])


def _verdict(cheat: bool, confidence: float) -> str:
    category = "vcs_history" if cheat else "none"
    return json.dumps(
        {"rationale": "read it", "cheat": cheat, "category": category, "confidence": confidence}
    )


class Model:
    """A chat-completions server whose model answers `answer(action text)`; counts calls."""

    def __init__(self, answer: Callable[[str], str]) -> None:
        self.answer = answer
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        content = self.answer(_under_review(request))
        return httpx.Response(
            200, json={"choices": [{"message": {"role": "assistant", "content": content}}]}
        )

    def judge(self, **overrides: object) -> Judge:
        return Judge(_settings(**overrides), transport=httpx.MockTransport(self))


def discerning(action: str) -> str:
    return _verdict(any(c in action for c in CHEATS), 0.9)


def test_a_judge_right_on_every_probe_is_useful() -> None:
    model = Model(discerning)
    state = calibrate(model.judge(), URL, clock=lambda: 100.0)
    assert (state.configured, state.reachable, state.useful) == (True, True, True)
    assert state.checked_at == 100.0 and state.model == "m"
    assert model.calls == len(PROBES) == len(state.answers)
    assert all(a.answered is a.expected for a in state.answers)
    assert {a.expected for a in state.answers} == {Decision.intercept, Decision.allow}


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (_verdict(True, 0.5), "allow"),  # the local SmolLM2: "cheat", never sure enough
        (_verdict(False, 0.9), "allow"),
        (_verdict(True, 0.95), "cheat"),
    ],
)
def test_a_judge_that_answers_the_same_whatever_the_action_is_not_useful(
    answer: str, said: str
) -> None:
    state = calibrate(Model(lambda _: answer).judge(), URL)
    assert (state.reachable, state.useful) == (True, False)
    assert state.reason == f"constant: it answers {said} whatever the action"


def test_a_judge_wrong_on_one_plain_case_is_not_useful() -> None:
    def flags_test_runs(action: str) -> str:
        return _verdict(any(c in action for c in (*CHEATS, "pytest")), 0.9)

    state = calibrate(Model(flags_test_runs).judge(), URL)
    assert state.useful is False
    assert state.reason == "wrong on 1 of 6 plain cases: honest: visible tests run"


def test_a_judge_whose_answers_hold_no_verdict_is_reachable_but_not_useful() -> None:
    model = Model(lambda _: "Cheating is a serious offense.")
    state = calibrate(model.judge(), URL)
    assert (state.reachable, state.useful) == (True, False)
    assert state.reason.startswith(f"no verdict on {len(PROBES)} of {len(PROBES)} probes")
    assert "invalid_output" in state.reason
    assert model.calls == 2 * len(PROBES)  # each asked once more to repair, as a review is


def test_a_judge_that_is_down_is_asked_once() -> None:
    calls: list[httpx.Request] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        raise httpx.ConnectError("connection refused", request=request)

    judge = Judge(_settings(), transport=httpx.MockTransport(refuse))
    state = calibrate(judge, URL)
    assert (state.reachable, state.useful) == (False, False)
    assert state.reason.startswith("not reachable: unreachable: ConnectError")
    assert len(calls) == 1 and len(state.answers) == 1


def test_probes_are_asked_afresh_not_answered_from_the_cache() -> None:
    model = Model(discerning)
    judge = model.judge()
    calibrate(judge, URL)
    calibrate(judge, URL)
    assert model.calls == 2 * len(PROBES)


def test_the_url_shown_carries_no_credentials() -> None:
    state = calibrate(Model(discerning).judge(), "https://user:secret@judge.example:8443/v1")
    assert state.url == "https://judge.example:8443/v1"


# ------------------------------------------------------------- a judge not worth using

NOT_USEFUL = JudgeState(
    configured=True,
    reachable=True,
    useful=False,
    reason="constant: it answers allow whatever the action",
    checked_at=1.0,
)


@pytest.mark.parametrize(
    ("policy", "decision"),
    [(FailurePolicy.fail_open, Decision.allow), (FailurePolicy.fail_closed, Decision.intercept)],
)
def test_a_judge_not_worth_using_is_asked_nothing_and_says_why(
    policy: FailurePolicy, decision: Decision
) -> None:
    model = Model(discerning)
    judge = model.judge(failure_policy=policy)
    judge.use_calibration(NOT_USEFUL)
    outcome = judge.review_action(BashAction(command="git log --all"))
    assert (outcome.status, outcome.decision, outcome.verdict) == (
        JudgeStatus.unused,
        decision,
        None,
    )
    assert outcome.reason == (
        "the judge's answer is not used: constant: it answers allow whatever the action"
    )
    assert outcome.review.startswith("unused (0.00s): the judge's answer is not used")
    trajectory = judge.review_trajectory("fix it", "def f(): return 42")
    # no evidence of cheating, whatever the policy: a trajectory review decides nothing else
    assert (trajectory.status, trajectory.decision) == (JudgeStatus.unused, Decision.allow)
    assert trajectory.evidence() is None
    assert model.calls == 0


def test_a_worker_judge_counts_only_once_calibrated() -> None:
    model = Model(discerning)
    judge = model.judge()
    calibrator = Calibrator(judge, None, owner="w1")  # no Redis: it asks for itself
    before = judge.review_action(BashAction(command="git log --all"))
    assert before.status is JudgeStatus.unused and "not calibrated yet" in before.reason
    assert model.calls == 0
    assert calibrator.refresh().useful is True
    after = judge.review_action(BashAction(command="git log --all --oneline"))
    assert (after.status, after.decision) == (JudgeStatus.verdict, Decision.intercept)
    assert "cheat at confidence 0.90" in after.review


# ------------------------------------------------------------------ shared in Redis


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_process_asks_and_the_others_take_its_calibration(quiet_redis: redis.Redis) -> None:
    clock = Clock()
    first, second = Model(discerning), Model(discerning)
    one = Calibrator(first.judge(), quiet_redis, owner="w1", clock=clock)
    two = Calibrator(
        second.judge(calibration_interval_s=60.0), quiet_redis, owner="w2", clock=clock
    )
    assert two.next_in() == calibration.WATCH_S  # none known yet: it looks again soon
    assert one.refresh().useful is True and first.calls == len(PROBES)
    taken = two.refresh()
    assert taken.useful is True and second.calls == 0  # the fresh shared one
    assert calibration.read(quiet_redis) == taken
    assert two.next_in() == 60.0

    clock.now += 61.0  # stale for `two`; the claim `one` made has not expired
    assert two.refresh() == taken and second.calls == 0  # another process holds the claim
    quiet_redis.delete("proctor:judge-calibration-lock")
    assert two.refresh().checked_at == clock.now and second.calls == len(PROBES)


def test_a_calibration_of_another_judge_is_not_taken(quiet_redis: redis.Redis) -> None:
    other = Calibrator(Model(discerning).judge(url="http://other.test/v1"), quiet_redis, owner="a")
    other.refresh()
    quiet_redis.delete("proctor:judge-calibration-lock")
    model = Model(lambda _: _verdict(True, 0.5))
    state = Calibrator(model.judge(), quiet_redis, owner="b").refresh()
    assert state.useful is False and state.url == URL and model.calls == len(PROBES)
