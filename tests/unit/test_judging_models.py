"""The wire contract of code-contest judging (`proctor/judging.py`) and its admission."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from core.limits import oneshot_seconds
from proctor.judging import CASE_SLACK_S, CHECKER_COMPILE_S
from proctor.models import EpisodeCreate, TaskSpec

CASES = [{"stdin": "1\n", "expected_stdout": "1\n"}] * 3


def task(**fields: object) -> dict[str, object]:
    return {
        "image": "cpp",
        "language": "cpp",
        "tests": {"format": "cases", "judge": {"cases": CASES}},
        "limits": {"timeout_s": 2, "compile_timeout_s": 10},
        **fields,
    }


def test_format_cases_needs_a_judge_and_a_program() -> None:
    TaskSpec.model_validate(task())
    with pytest.raises(ValidationError, match="go together"):
        TaskSpec.model_validate(task(tests={"format": "cases"}))
    with pytest.raises(ValidationError, match="go together"):
        TaskSpec.model_validate(task(tests={"judge": {"cases": CASES}}))
    with pytest.raises(ValidationError, match="give its `language`"):
        TaskSpec.model_validate(task(language="pytest"))
    with pytest.raises(ValidationError, match="give its `language`"):
        TaskSpec.model_validate(task(language=None))


def test_the_outputs_a_judged_run_returns_are_bounded() -> None:
    many = [{"stdin": "", "expected_stdout": ""}] * 1000
    with pytest.raises(ValidationError, match=r"lower limits\.output_bytes"):
        TaskSpec.model_validate(
            task(
                tests={"format": "cases", "judge": {"cases": many}},
                limits={"output_bytes": 1 << 20},
            )
        )


def test_admission_counts_every_case_and_the_checker() -> None:
    plain = EpisodeCreate.model_validate({"task": task(), "solution": {"files": {"main.cpp": ""}}})
    assert oneshot_seconds(plain) == pytest.approx(3 * (2 + CASE_SLACK_S) + 10)
    checked = task(tests={"format": "cases", "judge": {"cases": CASES, "checker": {"source": "x"}}})
    with_checker = EpisodeCreate.model_validate(
        {"task": checked, "solution": {"files": {"main.cpp": ""}}}
    )
    assert oneshot_seconds(with_checker) == pytest.approx(
        3 * (2 + CASE_SLACK_S) + CHECKER_COMPILE_S + 3 * 2 + 10
    )
