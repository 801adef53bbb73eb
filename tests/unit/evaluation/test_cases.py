"""Per-case verdicts and the episode's score from a judge's record (`workers/evaluation/cases.py`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proctor.judging import CaseVerdict, Checker, JudgeSpec, StdioCase
from proctor.models import Scoring, Verdict
from workers.evaluation.cases import CheckerBroken, RecordMalformed, case_verdict, score_cases

JUDGE = JudgeSpec(cases=[StdioCase(stdin="1\n", expected_stdout="1\n")] * 4)


def ran(stdout: str = "1\n", code: int = 0, status: str = "exited", **more: Any) -> dict[str, Any]:
    return {"status": status, "exit_code": code, "time_s": 0.01, "stdout": stdout, **more}


@pytest.mark.parametrize(
    ("case", "verdict"),
    [
        (ran(), CaseVerdict.accepted),
        (ran("2\n"), CaseVerdict.wrong_answer),
        (ran(code=1, stderr="Traceback ...\nValueError: x\n"), CaseVerdict.runtime_error),
        (ran(code=1, stderr="Traceback ...\nMemoryError\n"), CaseVerdict.memory_limit),
        (ran(code=-6, stderr="what():  std::bad_alloc\n"), CaseVerdict.memory_limit),
        (
            ran(
                code=1,
                stderr='Exception in thread "main" java.lang.OutOfMemoryError: Java heap space',
            ),
            CaseVerdict.memory_limit,
        ),
        (ran(code=2, stderr="fatal error: runtime: out of memory\n"), CaseVerdict.memory_limit),
        (ran(status="oom", code=-9), CaseVerdict.memory_limit),
        (ran(status="timeout", code=None), CaseVerdict.time_limit),
        (ran(status="output_limit", code=-9), CaseVerdict.output_limit),
        ({"status": "skipped"}, CaseVerdict.skipped),
    ],
)
def test_case_verdicts(case: dict[str, Any], verdict: CaseVerdict) -> None:
    assert case_verdict(case, "1\n", JUDGE)[0] is verdict


def test_a_checker_decides_by_testlib_exit_codes() -> None:
    judge = JUDGE.model_copy(update={"checker": Checker(source="x")})
    for code, verdict in [
        (0, CaseVerdict.accepted),
        (1, CaseVerdict.wrong_answer),
        (2, CaseVerdict.wrong_answer),
        (3, CaseVerdict.checker_failed),
        (None, CaseVerdict.checker_failed),
        (-11, CaseVerdict.checker_failed),
    ]:
        checked = ran("anything\n", checker={"exit_code": code, "message": "m"})
        assert case_verdict(checked, "1\n", judge)[0] is verdict, code
    with pytest.raises(RecordMalformed):
        case_verdict(ran(), "1\n", judge)  # exited 0 and not checked: not our runner's record


def record(*cases: dict[str, Any], **more: Any) -> str:
    return json.dumps({"cases": list(cases), **more})


def test_partial_and_binary_rewards_and_the_first_failure_verdict() -> None:
    text = record(ran(), ran(status="timeout", code=None), ran("9\n"), ran())
    partial = score_cases(text, JUDGE, Scoring.partial)
    assert partial.verdict is Verdict.timeout
    assert partial.reward == 0.5
    assert [t.verdict for t in partial.tests] == [
        CaseVerdict.accepted,
        CaseVerdict.time_limit,
        CaseVerdict.wrong_answer,
        CaseVerdict.accepted,
    ]
    assert score_cases(text, JUDGE, Scoring.binary).reward == 0.0
    passed = score_cases(record(ran(), ran(), ran(), ran()), JUDGE, Scoring.binary)
    assert (passed.verdict, passed.reward, passed.passed) == (Verdict.passed, 1.0, True)
    stopping = JUDGE.model_copy(update={"stop_on_failure": True})
    stopped = score_cases(text, stopping, Scoring.partial)
    assert stopped.reward == 0.25  # the cases after the first failure do not count
    output = score_cases(
        record(ran(status="output_limit"), ran(), ran(), ran()), JUDGE, Scoring.partial
    )
    assert output.verdict is Verdict.output_limit


def test_what_the_code_cannot_cause_is_not_scored() -> None:
    with pytest.raises(RecordMalformed):
        score_cases("not json", JUDGE, Scoring.partial)
    with pytest.raises(RecordMalformed):
        score_cases(record(ran()), JUDGE, Scoring.partial)  # one result for four cases
    with pytest.raises(CheckerBroken):
        score_cases(
            record(ran(), ran(), ran(), ran(), checker_build={"exit_code": 1, "message": "e"}),
            JUDGE,
            Scoring.partial,
        )
