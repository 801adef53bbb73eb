"""Trainers' code-task formats → episodes, and the generated tests run for real (no Docker).

The harness tests run the generated pytest file in a temporary directory with this
interpreter and grade its JUnit report with the worker's own scoring, so the verdicts are
the ones the service would give (the sandbox's isolation is tested end to end instead).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from proctor.client import ApiError, AsyncClient, Client, Unavailable
from proctor.integrations import codetasks
from proctor.integrations.codetasks import (
    CASES_FILE,
    SOLUTION_PATH,
    TEST_FILE,
    CodeTaskOptions,
    GroundTruthError,
    episode_for,
    extract_code,
    load_catalog,
    resolve_label,
    run_episodes,
    run_episodes_async,
)
from proctor.models import EpisodeCreate, EpisodeResult, Scoring, TestOutcome, Verdict
from tests.unit.integrations.conftest import FakeProctor
from tests.unit.test_scoring import sealed
from workers.evaluation.grading import SplitShape, split_shape
from workers.evaluation.scoring import Score, TestRun, score

ADD = "a, b = map(int, input().split())\nprint(a + b)\n"


def cases_of(episode: EpisodeCreate) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(episode.task.tests.files[CASES_FILE])
    return data


# ------------------------------------------------------------------------ extracting code


def test_extract_code_takes_the_last_python_block() -> None:
    text = "Idea:\n```python\nx = 1\n```\nFinal:\n```python\nx = 2\n```\n"
    assert extract_code(text) == "x = 2\n"


def test_extract_code_falls_back_to_the_first_block_then_to_the_whole_text() -> None:
    assert extract_code("```cpp\nint x;\n```\n```text\nhi\n```") == "int x;\n"
    assert extract_code("print(1)\n") == "print(1)\n"


# ------------------------------------------------------------------------ formats


def test_stdio_cases_become_one_test_per_case() -> None:
    episode = episode_for({"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]}, ADD)
    assert episode.solution is not None
    assert episode.solution.files == {SOLUTION_PATH: ADD}
    assert set(episode.task.tests.files) == {TEST_FILE, CASES_FILE}
    data = cases_of(episode)
    assert data["mode"] == "stdio"
    assert data["cases"] == [
        {"stdin": "1 2\n", "expected": "3\n"},
        {"stdin": "3 4\n", "expected": "7\n"},
    ]
    assert episode.task.limits.timeout_s == 2 * 10.0 + 15.0
    assert data["fail_fast"] is True  # binary scoring: the first failure decides


def test_ground_truth_may_be_json_text_and_apps_nests_it() -> None:
    inner = json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]})
    for ground_truth in (inner, json.dumps({"input_output": inner}), {"input_output": inner}):
        assert cases_of(episode_for(ground_truth, "print(1)"))["cases"] == [
            {"stdin": "1\n", "expected": "1\n"}
        ]


def test_call_based_inputs_are_json_lines_or_lists() -> None:
    verl_style = {"inputs": ["[1, 2]\n3", ""], "outputs": ["6", "[0]"], "fn_name": "f"}
    data = cases_of(episode_for(verl_style, "def f(): pass"))
    assert data["mode"] == "call"
    assert data["fn_name"] == "f"
    assert data["cases"] == [{"args": [[1, 2], 3], "expected": 6}, {"args": [], "expected": [0]}]
    apps_style = {"inputs": [[[1, 2], 3]], "outputs": [[6]], "fn_name": "f"}
    assert cases_of(episode_for(apps_style, ""))["cases"] == [
        {"args": [[1, 2], 3], "expected": [6]}
    ]


def test_assert_cases_append_to_the_solution() -> None:
    data = cases_of(episode_for({"assert_case": ["assert f(1) == 2"]}, "def f(x): return x + 1"))
    assert data["mode"] == "program"
    assert data["cases"] == [{"suffix": "assert f(1) == 2", "stdin": None, "expected": None}]


def test_humaneval_rows_check_the_entry_point_in_a_plain_test() -> None:
    """A plain test function: the workers grade it split (`grading.split_shape`)."""
    row = {"test": "def check(c):\n    assert c(2) == 4\n", "entry_point": "sq", "prompt": "..."}
    episode = episode_for(row, "def sq(x): return x * x")
    [(name, source)] = episode.task.tests.files.items()
    assert name == "test_check.py" and source.endswith("def test_check():\n    check(sq)\n")
    assert split_shape(episode.task) is SplitShape.functions
    with pytest.raises(GroundTruthError):
        episode_for({**row, "entry_point": "sq); import os; os._exit(0"}, "")


def test_a_proctor_task_is_used_as_it_is() -> None:
    task = {"tests": {"files": {"test_x.py": "def test_x(): pass"}}, "limits": {"timeout_s": 5}}
    episode = episode_for(task, "code")
    assert episode.task.tests.files == {"test_x.py": "def test_x(): pass"}
    assert episode.solution is not None and episode.solution.files == {"solution.py": "code"}
    wrapped = episode_for({"task": task, "solution_path": "pkg/impl.py"}, "code")
    assert wrapped.solution is not None and wrapped.solution.files == {"pkg/impl.py": "code"}


def test_options_set_limits_scoring_and_case_count() -> None:
    options = CodeTaskOptions(case_timeout_s=2, memory_mb=256, scoring=Scoring.partial, max_cases=1)
    episode = episode_for({"inputs": ["1", "2"], "outputs": ["1", "2"]}, "", options)
    assert len(cases_of(episode)["cases"]) == 1
    assert (episode.task.limits.timeout_s, episode.task.limits.memory_mb) == (17.0, 256)
    assert episode.task.scoring is Scoring.partial
    assert cases_of(episode)["fail_fast"] is False  # every case counts towards the fraction


@pytest.mark.parametrize(
    "ground_truth",
    [
        "not json",
        json.dumps([1, 2]),
        {"inputs": ["1"], "outputs": []},
        {"inputs": [], "outputs": []},
        {"something": "else"},
        {"inputs": ["not json"], "outputs": ["1"], "fn_name": "f"},
        {"tests": {"files": {"/etc/passwd": "x"}}},
    ],
)
def test_malformed_ground_truths_are_data_errors(ground_truth: Any) -> None:
    with pytest.raises(GroundTruthError):
        episode_for(ground_truth, "print(1)")


def test_labels_resolve_as_json_or_through_the_catalog(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        json.dumps({"id": "add", "inputs": ["1 2"], "outputs": ["3"]})
        + "\n\n"
        + json.dumps({"id": "t2", "ground_truth": {"assert_case": ["assert True"]}})
        + "\n"
    )
    catalog = load_catalog(path)
    assert resolve_label("add", catalog) == {"inputs": ["1 2"], "outputs": ["3"]}
    assert resolve_label("t2", catalog) == {"assert_case": ["assert True"]}
    assert resolve_label(' {"inputs": []}', None) == '{"inputs": []}'
    with pytest.raises(GroundTruthError, match="no task"):
        resolve_label("missing", catalog)
    with pytest.raises(GroundTruthError, match="no task catalog"):
        resolve_label("add", None)


# ------------------------------------------------------------------------ the harness


def grade(episode: EpisodeCreate, directory: Path) -> Score:
    """Run the episode's hidden tests like the grader does and score the report."""
    assert episode.solution is not None
    for path, content in {**episode.solution.files, **episode.task.tests.files}.items():
        (directory / path).write_text(content)
    report = directory / "report.xml"
    run = subprocess.run(
        [
            sys.executable,
            "-I",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            "-o",
            "junit_family=xunit1",
            TEST_FILE,
        ],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # sealed as the grader plugin seals it in the sandbox (the seal is tested on its own)
    xml = sealed(report.read_text()) if report.exists() else None
    return score(
        TestRun(exit_code=run.returncode, timed_out=False, oom_killed=False, report_xml=xml),
        episode.task.tests,
        episode.task.scoring,
    )


def outcomes(result: Score) -> list[TestOutcome]:
    return [case.outcome for case in result.tests]


def test_stdio_output_is_compared_like_verl_and_sandboxfusion(tmp_path: Path) -> None:
    truth = {
        "inputs": ["1 2\n", "2 2\n", "0.1 0.2\n"],
        "outputs": ["3", "4  \n\n\n", "0.30000001\n"],
    }
    program = "a, b = map(float, input().split())\nr = a + b\nprint(int(r) if r == int(r) else r)"
    result = grade(episode_for(truth, program), tmp_path)
    assert (result.verdict, result.reward) == (Verdict.passed, 1.0)
    assert [c.name for c in result.tests] == [f"{TEST_FILE}::test_case[case_{i}]" for i in range(3)]


def test_a_wrong_answer_fails_its_case_and_skips_the_rest(tmp_path: Path) -> None:
    truth = {"inputs": ["1 2\n", "3 4\n", "5 6\n"], "outputs": ["3\n", "8\n", "11\n"]}
    result = grade(episode_for(truth, ADD), tmp_path)
    assert (result.verdict, result.reward) == (Verdict.failed, 0.0)
    assert outcomes(result) == [TestOutcome.passed, TestOutcome.failed, TestOutcome.skipped]
    assert "wrong answer" in (result.tests[1].message or "")


def test_partial_scoring_runs_every_case(tmp_path: Path) -> None:
    truth = {"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "8\n"]}
    options = CodeTaskOptions(scoring=Scoring.partial)
    result = grade(episode_for(truth, ADD, options), tmp_path)
    assert (result.verdict, result.reward) == (Verdict.failed, 0.5)


def test_call_based_cases_find_functions_and_methods(tmp_path: Path) -> None:
    truth = {
        "inputs": ["[1, 2]\n3", "[5]\n1", "[]\n0"],
        "outputs": ["6", "[6]", "0"],
        "fn_name": "total",
    }
    program = (
        "class Solution:\n    def total(self, xs: List[int], k: int) -> int:\n"
        "        print('debug output does not garble the answer')\n"
        "        return sum(xs) + k\n"
    )
    result = grade(episode_for(truth, program), tmp_path)
    assert (result.verdict, outcomes(result)) == (Verdict.passed, [TestOutcome.passed] * 3)


def test_call_based_values_compare_by_type(tmp_path: Path) -> None:
    truth = {"inputs": ["1"], "outputs": ["1"], "fn_name": "f"}
    result = grade(episode_for(truth, "def f(x):\n    return True\n"), tmp_path)
    assert result.verdict is Verdict.failed  # True is not 1


def test_assert_cases_and_time_limits(tmp_path: Path) -> None:
    truth = {"assert_case": ["assert f(1) == 2", "assert f(-1) == 0", "f(10 ** 9)"]}
    program = "def f(x):\n    while x > 5:\n        pass\n    return x + 1\n"
    options = CodeTaskOptions(case_timeout_s=0.5, scoring=Scoring.partial)
    result = grade(episode_for(truth, program, options), tmp_path)
    assert outcomes(result) == [TestOutcome.passed, TestOutcome.passed, TestOutcome.failed]
    assert "time limit exceeded" in (result.tests[2].message or "")


def test_a_syntax_error_is_a_compile_error(tmp_path: Path) -> None:
    result = grade(episode_for({"inputs": ["1"], "outputs": ["1"]}, "def f(:\n"), tmp_path)
    assert (result.verdict, result.reward) == (Verdict.compile_error, 0.0)


def test_the_solution_cannot_read_the_expected_outputs(tmp_path: Path) -> None:
    # the cases file is deleted before the solution runs, so it cannot print the answers
    peek = (
        "import glob, json\n"
        "for path in glob.glob('*.json'):\n"
        "    print(json.load(open(path))['cases'][0]['expected'])\n"
    )
    truth = {"inputs": ["secret question\n"], "outputs": ["secret answer\n"]}
    result = grade(episode_for(truth, peek), tmp_path)
    assert result.verdict is Verdict.failed
    assert not (tmp_path / CASES_FILE).exists()


# ------------------------------------------------------------------------ running many


def test_run_episodes_submits_one_batch_and_reads_the_results_at_once(fake: FakeProctor) -> None:
    episodes = [
        episode_for({"inputs": ["1"], "outputs": ["1"]}, text)
        for text in ("RIGHT", "WRONG", "INFRA")
    ]
    with Client("http://proctor", transport=fake.transport) as client:
        results = run_episodes(client, episodes, timeout_s=10)
    assert [getattr(r, "reward", "err") for r in results] == [1.0, 0.0, None]
    assert [p for m, p in fake.requests] == ["/v1/episodes/batch", "/v1/episodes/results"]


def test_equal_samples_are_keyed_apart_and_a_resend_reuses_the_keys(
    fake: FakeProctor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(codetasks, "RESEND_AFTER_S", 0.0)
    fake.lost_answers = 1  # the service took the batch; its answer never came
    episodes = [episode_for({"inputs": ["1"], "outputs": ["1"]}, "RIGHT")] * 2
    with Client("http://proctor", transport=fake.transport) as client:
        results = run_episodes(client, episodes, timeout_s=10)
    assert [getattr(r, "reward", "err") for r in results] == [1.0, 1.0]
    # two samples, two episodes; the resend was the same call, not two more
    assert len(fake.episodes) == 2 and len({r.id for r in results if hasattr(r, "id")}) == 2
    assert [p for _, p in fake.requests].count("/v1/episodes/batch") == 2


def test_episodes_still_running_are_asked_for_again(fake: FakeProctor) -> None:
    fake.running_rounds = 2
    episodes = [episode_for({"inputs": ["1"], "outputs": ["1"]}, t) for t in ("RIGHT", "WRONG")]
    with Client("http://proctor", transport=fake.transport) as client:
        results = run_episodes(client, episodes, timeout_s=10)
    assert [getattr(r, "reward", "err") for r in results] == [1.0, 0.0]
    assert [p for _, p in fake.requests].count("/v1/episodes/results") == 3


async def test_an_expired_episode_is_an_error_in_its_slot_only(fake: FakeProctor) -> None:
    fake.expired = {"ep_1"}
    episodes = [episode_for({"inputs": ["1"], "outputs": ["1"]}, t) for t in ("RIGHT", "RIGHT")]
    async with AsyncClient("http://proctor", transport=fake.transport) as client:
        results = await run_episodes_async(client, episodes, timeout_s=10)
    assert isinstance(results[0], EpisodeResult) and results[0].reward == 1.0
    assert isinstance(results[1], ApiError) and results[1].status == 404


def test_past_the_deadline_what_still_runs_is_late(fake: FakeProctor) -> None:
    fake.running_rounds = 1_000_000
    episodes = [episode_for({"inputs": ["1"], "outputs": ["1"]}, "RIGHT")]
    with Client("http://proctor", transport=fake.transport) as client:
        (result,) = run_episodes(client, episodes, timeout_s=0.2)
    assert isinstance(result, Unavailable) and "did not finish" in str(result)


def test_a_refused_task_fails_alone(fake: FakeProctor) -> None:
    fake.refuse_images = {"nope"}
    good = episode_for({"inputs": ["1"], "outputs": ["1"]}, "RIGHT")
    bad = episode_for({"inputs": ["1"], "outputs": ["1"]}, "RIGHT", CodeTaskOptions(image="nope"))
    with Client("http://proctor", transport=fake.transport) as client:
        results = run_episodes(client, [good, bad], timeout_s=10)
    assert getattr(results[0], "reward", None) == 1.0
    assert "unknown image" in str(results[1])


async def test_run_episodes_async_waits_out_backpressure(fake: FakeProctor) -> None:
    from proctor.client import AsyncClient

    fake.overloaded_times = 1
    episodes = [episode_for({"inputs": ["1"], "outputs": ["1"]}, "RIGHT")] * 3
    async with AsyncClient("http://proctor", transport=fake.transport) as client:
        results = await run_episodes_async(client, episodes, timeout_s=10)
    assert [getattr(r, "reward", None) for r in results] == [1.0, 1.0, 1.0]


def test_an_unreachable_service_is_an_error_in_every_slot() -> None:
    with Client("http://127.0.0.1:9", timeout_s=2) as client:
        results = run_episodes(
            client, [episode_for('{"inputs":["1"],"outputs":["1"]}', "x")], timeout_s=5
        )
    assert isinstance(results[0], Unavailable)
