"""Files the agent added under protected directories: graded beside the hidden tests by
default, deleted before they run under `new_protected_files: remove`, never a cheat."""

from __future__ import annotations

from core.store import EpisodeRecord
from proctor.models import (
    CheatCategory,
    EpisodeCreate,
    EpisodeResult,
    EpisodeStatus,
    Evidence,
    EvidenceSource,
    NewProtectedFiles,
    Policy,
    Solution,
    TaskSpec,
    TestFormat,
    TestSpec,
    Verdict,
)
from workers.evaluation.grading import EVERY_NAME, GradingPlan, grading_plan
from workers.guard import added_evidence, apply_policy, is_cheat
from workers.sandbox.protocol import Program, Reply, Results, Scrub, ScrubResult, Write

RESTORE = {"tests/test_api.py": "def test_a():\n    pass\n", "setup.cfg": "[tool:pytest]\n"}
KEEP = {"tests/conftest.py", "src/conftest.py"}


def task(policy: NewProtectedFiles | None, fmt: TestFormat = TestFormat.junit) -> TaskSpec:
    return TaskSpec(
        tests=TestSpec(files={"tests/test_hidden.py": "def test_h():\n    pass\n"}, format=fmt),
        protected_paths=["tests/", "docs/api/", "setup.cfg"],
        policy=Policy(new_protected_files=policy) if policy else Policy(),
    )


def removals(plan: GradingPlan) -> list[Scrub]:
    return [op for op in plan.ops if isinstance(op, Scrub) and op.names == [EVERY_NAME]]


def test_by_default_an_added_file_is_graded_beside_the_hidden_tests() -> None:
    assert Policy().new_protected_files is NewProtectedFiles.grade
    for policy in (None, NewProtectedFiles.grade):
        plan = grading_plan(task(policy), keep=KEEP, restore=RESTORE)
        assert removals(plan) == []
        assert plan.removed(Results(Program(plan.ops), Reply(nonce="n", results={}))) == []


def test_remove_deletes_all_but_the_tasks_files_in_each_protected_directory() -> None:
    for fmt in (TestFormat.junit, TestFormat.exit_code, TestFormat.assert_):
        plan = grading_plan(task(NewProtectedFiles.remove, fmt), keep=KEEP, restore=RESTORE)
        scrubs = removals(plan)
        assert [(s.root, s.keep) for s in scrubs] == [
            ("/workspace/docs/api", []),
            ("/workspace/tests", ["conftest.py", "test_api.py"]),  # the task's, kept
        ]
        # after the task's files are written back, before the hidden tests are
        restored = next(i for i, op in enumerate(plan.ops) if isinstance(op, Write))
        hidden = next(
            i
            for i, op in enumerate(plan.ops)
            if isinstance(op, Write) and "tests/test_hidden.py" in op.files
        )
        at = [plan.ops.index(s) for s in scrubs]
        assert all(restored < i < hidden for i in at), plan.ops
        assert plan.ops.index(plan.test) > hidden


def test_the_removed_files_come_back_as_workspace_paths() -> None:
    """Steering files planted there count too (the first scrub took them); caches do not."""
    plan = grading_plan(task(NewProtectedFiles.remove), keep=KEEP, restore=RESTORE)
    [steering] = [op for op in plan.ops if isinstance(op, Scrub) and op not in removals(plan)]
    docs, tests = removals(plan)
    program = Program(plan.ops)
    planted = ["conftest.py", "tests/sub/conftest.py", "tests/__pycache__/t.cpython-311.pyc"]
    reply = Reply(
        nonce="n",
        results={
            program.id_of(steering): ScrubResult(removed=planted),
            program.id_of(docs): ScrubResult(removed=[]),
            program.id_of(tests): ScrubResult(
                removed=["test_regression.py", "sub/data.json", ".pytest_cache/v/cache/nodeids"]
            ),
        },
    )
    assert plan.removed(Results(program, reply)) == [
        "tests/sub/conftest.py",
        "tests/sub/data.json",
        "tests/test_regression.py",
    ]


def test_a_removed_file_is_on_record_but_never_a_cheat_nor_a_detection() -> None:
    [found] = added_evidence(["tests/test_regression.py"])
    assert found.source is EvidenceSource.integrity
    assert found.detail == "protected file added, removed before grading: tests/test_regression.py"
    assert not is_cheat(found, attempts_are_cheats=False)
    assert not is_cheat(found, attempts_are_cheats=True)

    request = EpisodeCreate(task=task(NewProtectedFiles.remove), solution=Solution())
    record = EpisodeRecord(
        id="ep_1", request=request, status=EpisodeStatus.running, created=0.0, result=None
    )
    passed = EpisodeResult(
        id="ep_1", status=EpisodeStatus.completed, verdict=Verdict.passed, reward=1.0, passed=True
    )
    result = apply_policy(record, passed, [found], None)
    assert (result.verdict, result.reward, result.cheat.detected) == (Verdict.passed, 1.0, False)
    assert result.cheat.evidence == [found]
    tampered = Evidence(
        source=EvidenceSource.integrity,
        category=CheatCategory.test_tampering,
        detail="protected file modified: tests/test_api.py",
    )
    result = apply_policy(record, passed, [found, tampered], None)
    assert (result.verdict, result.reward, result.cheat.detected) == (Verdict.cheat, 0.0, True)
