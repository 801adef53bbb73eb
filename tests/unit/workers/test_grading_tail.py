"""One grading tail for both modes: a one-shot and an interactive episode go from their
runner's reply to a result through the same function, and no other module of the workers
scores, applies the policy or types a broken runner on its own (a copy would drift);
its out-of-memory reading and its writing of the result."""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from proctor.models import (
    CheatCategory,
    EpisodeMode,
    EpisodeResult,
    EpisodeStatus,
    Evidence,
    EvidenceSource,
    Level,
    SandboxInfo,
    Timings,
    Verdict,
)
from tests.unit.workers import test_episode_levels as levels
from workers import grading_tail, interactive, oneshot
from workers.evaluation.grading import GradingPlan
from workers.sandbox.protocol import Run, RunResult
from workers.sandbox.sandbox import Cause, Failure, RunnerBroken

WORKERS = Path(grading_tail.__file__).parent
# the steps of the tail: called from the tail (or, for the scoring helpers, from scored_results.py
# which defines them), and nowhere else
TAIL_STEPS = {
    "score_test_run",
    "score_compile",
    "compile_failed",
    "compile_failed_result",
    "graded_result",
    "broken_result",
    "apply_policy",
    "added_evidence",
}
HOMES = {WORKERS / "grading_tail.py", WORKERS / "scored_results.py", WORKERS / "guard.py"}


def calls(node: ast.AST) -> set[str]:
    found = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            if isinstance(func, ast.Name):
                found.add(func.id)
            elif isinstance(func, ast.Attribute):
                found.add(func.attr)
    return found


def function(path: Path, name: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text())
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


@pytest.mark.parametrize(
    ("module", "name"),
    [(oneshot, "run_oneshot"), (interactive, "finish_interactive")],
)
def test_both_modes_grade_through_the_one_tail(module: ModuleType, name: str) -> None:
    assert module.grade_reply is grading_tail.grade_reply
    body = function(Path(str(module.__file__)), name)
    called = calls(body)
    assert "grade_reply" in called
    assert not called & TAIL_STEPS, f"{name} grades on its own: {called & TAIL_STEPS}"


def test_no_other_module_of_the_workers_has_a_copy_of_the_tail() -> None:
    copies = {
        str(path.relative_to(WORKERS)): sorted(calls(ast.parse(path.read_text())) & TAIL_STEPS)
        for path in WORKERS.rglob("*.py")
        if path not in HOMES and "assets" not in path.parts
    }
    assert {k: v for k, v in copies.items() if v} == {}


class Sandbox:
    def __init__(self, oom: bool) -> None:
        self.oom = oom
        self.asked = 0

    def oom_killed(self) -> bool:
        self.asked += 1
        return self.oom


def run(exit_code: int, *, oom: bool = False) -> RunResult:
    return RunResult(
        exit_code=exit_code, timed_out=False, duration_s=1.0, stdout="", stderr="", oom_killed=oom
    )


@pytest.mark.parametrize(
    ("result", "engine_says", "expected", "asked"),
    [
        (run(1, oom=True), False, True, 0),  # the runner read the cgroup's count
        (run(-9), True, True, 1),  # killed, and the engine saw the sandbox hit its limit
        (run(137), True, True, 1),  # the same, as a shell reports it
        (run(-9), False, False, 1),  # killed for another reason
        (run(1), True, False, 0),  # an ordinary failure: the engine is not asked
    ],
)
def test_out_of_memory_by_the_runs_account_or_the_engines(
    result: RunResult, engine_says: bool, expected: bool, asked: int
) -> None:
    sandbox = Sandbox(engine_says)
    assert grading_tail.oom_killed(sandbox, result) is expected  # type: ignore[arg-type]
    assert sandbox.asked == asked


class FlakyStore:
    """Redis away for the first `outage` attempts."""

    def __init__(self, outage: int) -> None:
        self.outage = outage
        self.written: list[EpisodeResult] = []

    def finish(self, result: EpisodeResult, *, request: object = None) -> bool:
        if self.outage:
            self.outage -= 1
            raise RedisConnectionError("Connection refused")
        self.written.append(result)
        return True


def test_the_result_is_written_once_redis_answers_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grading_tail, "REDIS_BACKOFF_S", (0.001, 0.002))
    store = FlakyStore(outage=5)
    result = EpisodeResult(id="ep_1", status=EpisodeStatus.completed)
    assert grading_tail.write_result(store, result) is True  # type: ignore[arg-type]
    assert store.written == [result] and store.outage == 0


class Guard:
    """What the tail asks of the guard beside the evidence it is given: nothing more."""

    def network_evidence(self, *args: object, **kwargs: object) -> list[Evidence]:
        return []

    def judge_trajectory(self, *args: object) -> tuple[list[Evidence], None]:
        return [], None


def test_a_cheat_whose_code_then_broke_its_sandbox_still_pays_the_cheat_reward() -> None:
    """Out of memory after the screen found a cheat: the cheat reward, not a 0 that a
    negative cheat reward would make the better outcome; without evidence, the typed 0."""
    record = levels.record(EpisodeMode.oneshot)
    cheat = Evidence(
        source=EvidenceSource.rule,
        category=CheatCategory.test_tampering,
        rule="tests.early-exit",
        detail="sys.exit(0) before the tests",
        level=Level.cheat,
    )
    broken = RunnerBroken(Failure(Verdict.oom, "the sandbox ran out of memory", Cause.memory))
    rt = SimpleNamespace(guard=Guard())
    test = Run(command="true", timeout_s=1.0)
    plan = GradingPlan(ops=[test], test=test, timeout_s=1.0)

    def grade(evidence: list[Evidence]) -> EpisodeResult:
        return grading_tail.grade_reply(
            rt,  # type: ignore[arg-type]
            record,
            broken,
            sandbox=None,  # type: ignore[arg-type]
            plan=plan,
            steps=[],
            info=SandboxInfo(),
            timings=Timings(),
            evidence=evidence,
            sent=0,
            since=0.0,
            trajectory="",
        )

    paid = grade([cheat])
    assert (paid.verdict, paid.reward) == (Verdict.cheat, levels.CHEAT_REWARD)
    assert [e.decisive for e in paid.cheat.evidence] == [True]
    typed = grade([])
    assert (typed.verdict, typed.reward) == (Verdict.oom, 0.0)
