"""Code-contest judging as runner operations: seal, compile once, run every case, check.

A task of format `cases` (`proctor.judging.JudgeSpec`) is graded by one `Run` whose `judge`
spec the runner's `assets/judge.py` plays: the program its language runs (`core.languages`,
compiled just before, once, with `-DONLINE_JUDGE` for C and C++) once per case. What each
case is allowed: `limits.timeout_s` of wall clock, `limits.output_bytes` of stdout (past
that it is killed: `output_limit`), the sandbox's `limits.memory_mb` (a kill for memory is
`memory_limit`), a stack of `judge.stack_mb` (by default its memory limit: deep recursion
is a contest program's right).

Where the expected outputs are (the code under test never reads them):

- built-in comparisons (`compare.py`): only in the worker. The sandbox gets the stdins; the
  record brings the outputs back; the worker compares.
- a checker: in the judge op, so in the runner's memory while the program runs (a process
  no process of the code under test can read), and on disk only after the last case, when
  every process of the code under test is dead, in a fresh 0700 directory of a random name
  outside the workspace, removed when the checker is done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.languages import LANGUAGES
from proctor.judging import CHECKER_COMPILE_S
from proctor.models import TaskSpec
from workers.sandbox.protocol import KillAll, MakeDir, Op, Run

# C and C++ programs are compiled as on Codeforces and most judges: `#ifndef ONLINE_JUDGE`
# blocks (a local freopen of input.txt) stay out
JUDGE_DEFINES = {"cpp": " -DONLINE_JUDGE", "c": " -DONLINE_JUDGE"}
CHECKER_COMMANDS = {
    # testlib.h is on the C++ image's include path (/usr/local/include)
    "cpp": ("checker.cpp", "g++ -std=c++17 -O2 -pipe checker.cpp -o checker", "./checker"),
    "python": ("checker.py", None, "python3 -I -B checker.py"),
}
RECORD_SLACK_BYTES = 8192  # a case's stderr start and fields, beyond its stdout


@dataclass(frozen=True, slots=True)
class JudgedRun:
    ops: list[Op[Any]]
    test: Run  # the judge op, one of `ops`
    compile: Run | None  # the program's compile, one of `ops`


def judged_run(
    task: TaskSpec,
    sealed: list[Op[Any]],
    *,
    grader: str,
    env: dict[str, str],
    compiled: Run | None,
    checker_dir: str,
) -> JudgedRun:
    """After `sealed` (the workspace sealed), make the program a home in `grader`, compile
    it (`compiled`, the language's compile step), judge every case."""
    judge = task.tests.judge
    lang = LANGUAGES[task.language or ""]
    assert judge is not None  # format `cases` and `judge` go together (TestSpec)
    limits = task.limits
    if compiled is not None and lang.name in JUDGE_DEFINES:
        compiled = Run(
            command=compiled.command + JUDGE_DEFINES[lang.name],
            env=compiled.env,
            timeout_s=compiled.timeout_s,
            output_bytes=compiled.output_bytes,
        )
    spec: dict[str, Any] = {
        "stdins": [case.stdin for case in judge.cases],
        "timeout_s": limits.timeout_s,
        "output_bytes": limits.output_bytes,
        "stack_bytes": (judge.stack_mb or limits.memory_mb) << 20,
        "stop_on_failure": judge.stop_on_failure,
    }
    if judge.checker is not None:
        source_name, build, run = CHECKER_COMMANDS[judge.checker.language]
        spec["checker"] = {
            "dir": checker_dir,
            "source_name": source_name,
            "source": judge.checker.source,
            "compile": build,
            "compile_timeout_s": CHECKER_COMPILE_S,
            "run": run,
            "timeout_s": limits.timeout_s,
            "expected": [case.expected_stdout for case in judge.cases],
        }
    test = Run(
        command=task.tests.command or lang.run,
        env=env,
        timeout_s=judge.run_seconds(limits.timeout_s),
        output_bytes=limits.output_bytes,
        report_bytes=len(judge.cases) * (limits.output_bytes + RECORD_SLACK_BYTES),
        judge=spec,
    )
    ops: list[Op[Any]] = [
        *sealed,
        MakeDir(path=grader),
        MakeDir(path=f"{grader}/home"),
        *([compiled] if compiled is not None else []),
        test,
        KillAll(),
    ]
    return JudgedRun(ops=ops, test=test, compile=compiled)
