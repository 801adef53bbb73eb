"""Calibration against the real local judge (llama.cpp with SmolLM2-135M, `scripts/judge.sh`):
the probes go over the real wire, every one gets an answer, and a model this small is found
not worth using — so a worker with it configured leaves every review to the rules'
fallbacks, and says so."""

from __future__ import annotations

import pytest

from anticheat.judge.calibration import PROBES, calibrate
from anticheat.judge.client import Judge, JudgeSettings, JudgeStatus
from proctor.models import BashAction

pytestmark = pytest.mark.judge

BUDGET_S = 90.0  # the tiny model on 2 shared cores; speed is not what is tested here


def test_the_local_model_is_reachable_and_found_not_useful(judge_url: str) -> None:
    settings = JudgeSettings(url=judge_url, timeout_s=BUDGET_S, action_budget_s=BUDGET_S)
    with Judge(settings) as judge:
        state = calibrate(judge, judge_url)
        judge.use_calibration(state)
        outcome = judge.review_action(BashAction(command="git log --all --oneline"))
    assert (state.configured, state.reachable, state.useful) == (True, True, False), state
    assert state.model == "smollm2-135m" and len(state.answers) == len(PROBES)
    assert state.reason.startswith(("constant:", "wrong on", "no verdict on")), state.reason
    assert (outcome.status, outcome.verdict) == (JudgeStatus.unused, None)
    assert state.reason in outcome.reason
