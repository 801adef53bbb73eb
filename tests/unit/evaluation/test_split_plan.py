"""Which tasks are graded across a process boundary, the plan that does it, and the record."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from proctor.models import EpisodeCreate, TaskSpec, TestOutcome, Verdict
from workers.evaluation.grading import SplitShape, grading_plan, plain_test_module, split_shape
from workers.evaluation.marker import Marker
from workers.evaluation.record import CaseRecord, RecordError, read_record
from workers.evaluation.scoring import Scoring, TestRun, score
from workers.sandbox.protocol import Run, Write


def task(tests: str, **more: Any) -> TaskSpec:
    files = {"test_solution.py": tests}
    return TaskSpec.model_validate({"tests": {"files": files, **more}})


PLAIN = "from solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"


@pytest.mark.parametrize(
    "source",
    [
        PLAIN,
        "import pytest\nfrom solution import f\n\ndef test_raises():\n"
        "    with pytest.raises(ValueError):\n        f()\n",
        "from pytest import approx\nfrom solution import f\n\ndef test_f():\n"
        "    assert f() == approx(0.3)\n",
        "def check(candidate):\n    assert candidate(1) == 2\n\nclass Helper:\n    pass\n",
    ],
)
def test_plain_test_modules(source: str) -> None:
    assert plain_test_module(source)


@pytest.mark.parametrize(
    "source",
    [
        "def test_tmp(tmp_path):\n    pass\n",  # a fixture
        "import pytest\n\n@pytest.mark.parametrize('x', [1])\ndef test_x(x):\n    pass\n",
        "class TestAdd:\n    def test_add(self):\n        pass\n",
        "import pytest\n\n@pytest.fixture\ndef thing():\n    return 1\n",
        "def setup_module():\n    pass\n",
        "async def test_async():\n    pass\n",
        "import pytest\npytestmark = pytest.mark.slow\n",
        "from pytest import fixture\n",
        "def test_(:\n",  # does not parse: pytest reports it as pytest does
    ],
)
def test_modules_that_need_pytest_itself(source: str) -> None:
    assert not plain_test_module(source)


def test_shapes() -> None:
    assert split_shape(task(PLAIN)) is SplitShape.functions
    assert split_shape(task(PLAIN, format="assert")) is SplitShape.programs
    assert split_shape(task("def test_x(tmp_path):\n    pass\n")) is None
    assert split_shape(task(PLAIN, command="pytest -x")) is None
    assert split_shape(task(PLAIN, format="exit_code")) is None
    sci = TaskSpec.model_validate({"image": "python-sci", "tests": {"files": {"t.py": PLAIN}}})
    assert split_shape(sci) is None  # its results are arrays and frames, not plain data


def test_the_split_plan_never_writes_the_tests_where_the_solution_is() -> None:
    spec = task(PLAIN)
    plan = grading_plan(spec, keep=set(), restore={}, split=True)
    assert plan.split is SplitShape.functions
    assert plan.test.split == {"files": spec.tests.files, "binary": {}, "shape": "functions"}
    writes = [op for op in plan.ops if isinstance(op, Write)]
    assert all("test_solution.py" not in op.files for op in writes)
    # without a root server, the same task runs in-process
    assert grading_plan(spec, keep=set(), restore={}).split is None
    runs = [op for op in grading_plan(spec, keep=set(), restore={}).ops if isinstance(op, Run)]
    assert all(op.split is None for op in runs)


@pytest.mark.parametrize(
    "change",
    [
        {"mode": "interactive"},
        {"task": {"language": "cpp"}},
    ],
)
def test_the_assert_format_is_refused_where_it_cannot_be_split(change: dict[str, Any]) -> None:
    body: dict[str, Any] = {
        "task": {"tests": {"files": {"t.py": "assert 1\n"}, "format": "assert"}},
        "solution": {"files": {"solution.py": ""}},
    }
    if "mode" in change:
        body["mode"] = change["mode"]
        del body["solution"]
    body["task"].update(change.get("task", {}))
    with pytest.raises(ValidationError, match="format `assert`"):
        EpisodeCreate.model_validate(body)


def run_of(record: object, *, exit_code: int = 0, split: SplitShape) -> TestRun:
    text = record if isinstance(record, str) else json.dumps(record)
    return TestRun(exit_code, False, False, text, split=split)


def test_a_completed_programs_record_passes() -> None:
    spec = task(PLAIN, format="assert").tests
    outcome = score(
        run_of({"completed": True, "files": ["test_solution.py"]}, split=SplitShape.programs),
        spec,
        Scoring.binary,
    )
    assert (outcome.verdict, outcome.reward) == (Verdict.passed, 1.0)


def test_a_programs_record_that_stopped_says_why() -> None:
    spec = task(PLAIN, format="assert").tests
    record = {
        "completed": False,
        "file": "test_solution.py",
        "exception": "SyntaxError",
        "message": "x",
    }
    outcome = score(run_of(record, split=SplitShape.programs), spec, Scoring.binary)
    assert outcome.verdict is Verdict.compile_error


def test_cases_score_as_a_report_would() -> None:
    spec = task(PLAIN).tests
    cases = [
        {"name": "test_solution.py::a", "outcome": "passed", "message": None},
        {"name": "test_solution.py::b", "outcome": "failed", "message": "AssertionError"},
    ]
    outcome = score(
        run_of({"cases": cases, "gone": ""}, split=SplitShape.functions), spec, Scoring.partial
    )
    assert (outcome.verdict, outcome.reward) == (Verdict.failed, 0.5)
    gone = score(
        run_of({"cases": cases, "gone": "it exited"}, split=SplitShape.functions),
        spec,
        Scoring.partial,
    )
    assert (gone.verdict, gone.reward) == (Verdict.failed, 0.0)  # no fraction for an exit


def test_skipped_cases_are_no_pass() -> None:
    spec = task(PLAIN).tests
    cases = [{"name": "test_solution.py::a", "outcome": "skipped", "message": "Skipped"}]
    outcome = score(
        run_of({"cases": cases, "gone": ""}, split=SplitShape.functions), spec, Scoring.binary
    )
    assert outcome.reward == 0.0


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "not json",
        "[" * 100_000 + "]" * 100_000,  # nesting past the parser's recursion
        json.dumps([1, 2]),
        json.dumps({"cases": "no"}),
        json.dumps({"cases": [{"name": 1}]}),
        json.dumps({"cases": [{"name": "a", "outcome": "won"}]}),
        json.dumps({"neither": True}),
        "x" * (9 << 20),
    ],
)
def test_a_malformed_record_is_a_failure_never_ours(text: str | None) -> None:
    with pytest.raises(RecordError):
        read_record(text)
    spec = task(PLAIN).tests
    outcome = score(
        TestRun(0, False, False, text, split=SplitShape.functions), spec, Scoring.binary
    )
    assert (outcome.verdict, outcome.reward) == (Verdict.failed, 0.0)


def test_records_read_back() -> None:
    assert read_record('{"completed": true, "files": ["a.py", 3]}') == Marker(
        completed=True, files=["a.py"]
    )
    record = read_record('{"cases": [{"name": "a::b", "outcome": "passed"}], "gone": ""}')
    assert isinstance(record, CaseRecord)
    assert [c.outcome for c in record.report.cases] == [TestOutcome.passed]
