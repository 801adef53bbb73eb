"""Code-contest judging on the wire: stdin/stdout cases, how outputs compare, a checker.

A task whose `tests.format` is `cases` carries a `JudgeSpec` in `tests.judge`: its program
(the task's `language`, compiled once) runs once per case in one sandbox, each case with
its own stdin and the task's limits (`limits.timeout_s` and `limits.output_bytes` per case,
`limits.memory_mb`, `stack_mb`), and gets a `CaseVerdict`. The reward is
the fraction of cases accepted under `scoring: partial`, 1 only when all are under
`scoring: binary` (the default). Defined apart from `proctor.models` (which imports it)
so the contract of judging reads in one place.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CASE_SLACK_S",
    "CHECKER_COMPILE_S",
    "MAX_CASES",
    "CaseVerdict",
    "Checker",
    "Comparison",
    "JudgeSpec",
    "StdioCase",
]

MAX_CASES = 1000
CASE_SLACK_S = 0.5  # a case's start, its kill and its leftovers' kill, beyond its time limit
# a checker's compile: the task's, not the code's, so not the code's compile timeout (g++
# parses testlib.h's 200 kB in seconds, many on a busy host)
CHECKER_COMPILE_S = 60.0


class Comparison(StrEnum):
    """How an accepted output is told from a wrong one, without a checker."""

    exact = "exact"  # byte for byte
    lines = "lines"  # trailing spaces of each line and trailing blank lines ignored
    tokens = "tokens"  # the same whitespace-separated tokens
    float = "float"  # tokens; two numbers within `abs_tolerance` or `rel_tolerance` are equal


class CaseVerdict(StrEnum):
    """One case's verdict, as an online judge gives it."""

    accepted = "accepted"
    wrong_answer = "wrong_answer"
    time_limit = "time_limit"
    memory_limit = "memory_limit"
    runtime_error = "runtime_error"
    output_limit = "output_limit"
    checker_failed = "checker_failed"  # the task's checker crashed or said `_fail`: not a pass
    skipped = "skipped"  # not run: the run's time was spent, or an earlier case failed


class StdioCase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stdin: str = Field("", max_length=16 << 20)
    expected_stdout: str = Field(max_length=16 << 20)


class Checker(BaseModel):
    """A task-supplied checker (testlib's convention): run as `checker input output answer`
    (the case's stdin, the program's stdout, the expected stdout, as files); exit 0 accepts,
    1 (wrong answer), 2 (presentation error) or any other code of the code's fault rejects,
    3 (`_fail`), a crash or a timeout is the checker's failure (`checker_failed`)."""

    model_config = ConfigDict(extra="forbid")

    language: Literal["cpp", "python"] = Field(
        "cpp", description="cpp: compiled once with g++ -O2, testlib.h on the include path"
    )
    source: str = Field(max_length=4 << 20)


class JudgeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cases: list[StdioCase] = Field(min_length=1, max_length=MAX_CASES)
    comparison: Comparison = Comparison.lines
    abs_tolerance: float = Field(1e-6, ge=0, description="`float` comparison: |a - b| <= this")
    rel_tolerance: float = Field(1e-6, ge=0, description="`float`: |a - b| <= this * |b|")
    checker: Checker | None = Field(None, description="decides instead of `comparison`")
    stack_mb: int | None = Field(
        None, ge=1, le=16_384, description="the program's stack limit; default: its memory limit"
    )
    stop_on_failure: bool = Field(
        False, description="skip the cases after the first that is not accepted"
    )

    def run_seconds(self, timeout_s: float) -> float:
        """The longest the judged run takes: every case at its time limit (`timeout_s`) and
        its share of slack, then the checker's compile and one run per case at that limit."""
        cases = len(self.cases)
        total = cases * (timeout_s + CASE_SLACK_S)
        if self.checker is not None:
            total += CHECKER_COMPILE_S + cases * timeout_s
        return total
