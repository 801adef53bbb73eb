"""The compile step of the grading phase: its own run, after the seal, before the tests,
within the task's compile limit (the compiler's own time) and output cap; a failed one
scores `compile_error`."""

from __future__ import annotations

from core.defaults import COMPILE_WALL_FACTOR, COMPILE_WALL_SLACK_S
from proctor.models import Limits, TaskSpec, TestFormat, TestSpec, Verdict
from workers.evaluation.grading import grading_plan
from workers.results import compile_failed, score_compile
from workers.sandbox.protocol import KillAll, Run, RunResult, Write


def task(language: str | None, **limits: float) -> TaskSpec:
    return TaskSpec(
        image="cpp",
        language=language,
        tests=TestSpec(
            files={"in.txt": "1\n"}, command="./main < in.txt", format=TestFormat.exit_code
        ),
        limits=Limits(output_bytes=4096, **limits),
    )


def test_a_compiled_language_compiles_in_its_own_checked_run_before_the_tests() -> None:
    plan = grading_plan(task("cpp", compile_timeout_s=7, timeout_s=2), keep=set(), restore={})
    assert plan.compile is not None
    ops = plan.ops
    at = ops.index(plan.compile)
    assert any(isinstance(op, KillAll) for op in ops[:at])  # after the seal
    # a compile that reads only its source sees no test file: those come straight after it
    assert not any(isinstance(op, Write) and "in.txt" in op.files for op in ops[:at])
    assert isinstance(ops[at + 1], Write) and ops[at + 1].files == {"in.txt": "1\n"}
    assert ops[at + 2] is plan.test
    assert plan.compile.command.startswith("g++ ")
    # the limit counts the compiler's own time (CPU and wall both over it); the wall clock
    # alone stops it only at a multiple of it
    assert plan.compile.cpu_limit_s == 7
    assert plan.compile.timeout_s == 7 * COMPILE_WALL_FACTOR + COMPILE_WALL_SLACK_S
    assert plan.compile.output_bytes == 4096
    assert not plan.compile.check  # the test run still runs: it fails, it never breaks
    assert plan.test.timeout_s == 2


def test_a_compile_that_builds_the_tests_has_them_in_the_workspace() -> None:
    spec = task("go_test").model_copy(
        update={"tests": TestSpec(files={"x_test.go": "package main\n"})}
    )
    plan = grading_plan(spec, keep=set(), restore={})
    assert plan.compile is not None
    at = plan.ops.index(plan.compile)
    assert any(isinstance(op, Write) and "x_test.go" in op.files for op in plan.ops[:at])


def test_interpreted_and_unset_languages_have_no_compile_step() -> None:
    for language in (None, "python", "nodejs", "bash"):
        plan = grading_plan(task(language), keep=set(), restore={})
        assert plan.compile is None
        assert not [op for op in plan.ops if isinstance(op, Run) and op is not plan.test]


def test_the_default_command_of_a_compiled_language_is_its_run() -> None:
    spec = task("rust").model_copy(update={"tests": TestSpec(format=TestFormat.exit_code)})
    assert grading_plan(spec, keep=set(), restore={}).test.command == "./main"


def run_result(exit_code: int, *, timed_out: bool = False) -> RunResult:
    return RunResult(exit_code=exit_code, timed_out=timed_out, duration_s=1.0, stdout="", stderr="")


def test_a_compile_that_failed_or_ran_out_of_time_is_the_codes_fault() -> None:
    spec = task("cpp", compile_timeout_s=3)
    assert not compile_failed(None) and not compile_failed(run_result(0))
    failed = score_compile(run_result(1), spec, oom_killed=False)
    assert (failed.verdict, failed.reward, failed.passed) == (Verdict.compile_error, 0.0, False)
    assert "does not compile" in failed.reason
    assert compile_failed(run_result(-9, timed_out=True))
    late = score_compile(run_result(-9, timed_out=True), spec, oom_killed=False)
    assert late.verdict is Verdict.compile_error and "3 s" in late.reason
    assert "memory" in score_compile(run_result(137), spec, oom_killed=True).reason
