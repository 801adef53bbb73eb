"""`/run_jupyter`: the episode a request becomes, the driver's per-cell outputs (the driver
run by this Python over a scratch workspace, as the sandbox's runs it), and the answer in
SandboxFusion's shape."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from proctor.models import EpisodeResult, EpisodeStatus, Timings, Verdict
from service.adapters.jupyter import (
    CONFIG,
    DRIVER,
    RESULT,
    RunJupyterRequest,
    run_jupyter_episode,
    run_jupyter_response,
)


def drive(tmp_path: Path, cells: list[str], cell_timeout: float = 0) -> list[dict[str, Any]]:
    """The episode's files written as the sandbox gets them, its test command run here."""
    episode = run_jupyter_episode(RunJupyterRequest(cells=cells, cell_timeout=cell_timeout))
    assert episode.solution is not None
    for path, content in {**episode.solution.files, **episode.task.tests.files}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(content)
    subprocess.run([sys.executable, DRIVER], cwd=tmp_path, check=True, timeout=60)
    cells_out: list[dict[str, Any]] = json.loads((tmp_path / RESULT).read_text())["cells"]
    return cells_out


def test_cells_are_solution_files_and_the_driver_comes_with_the_tests() -> None:
    episode = run_jupyter_episode(
        RunJupyterRequest(cells=["a = 1", "a"], total_timeout=7, fetch_files=["out.txt"])
    )
    task = episode.task
    assert episode.solution is not None
    assert episode.solution.files == {"cells/cell_0000.py": "a = 1", "cells/cell_0001.py": "a"}
    assert set(task.tests.files) == {DRIVER, CONFIG}
    assert task.tests.fetch == [RESULT, "out.txt"]
    assert (task.image, task.limits.timeout_s) == ("python-sci", 7)


def test_the_driver_runs_sandboxfusions_cells_as_a_kernel_would(tmp_path: Path) -> None:
    cells = drive(
        tmp_path,
        [
            'a = "hello"',
            "a",
            'import sys\nsys.stderr.write("This is an error message\\n")',
            "assert False",
            "print(a)",
            "def f(:",
            "display(1, 2)\n3",
            "None",
        ],
    )
    assert [c["stdout"] for c in cells][:5] == ["", "", "", "", "hello\n"]
    assert cells[1]["display"] == [{"text/plain": "'hello'"}]
    assert cells[2]["stderr"] == "This is an error message\n"
    # a write's return value is the last expression: displayed, as a kernel shows it
    assert cells[2]["display"] == [{"text/plain": "25"}]
    assert cells[3]["error"][0]["ename"] == "AssertionError"
    assert cells[5]["error"][0]["ename"] == "SyntaxError"
    assert [d["text/plain"] for d in cells[6]["display"]] == ["1", "2", "3"]
    assert cells[7]["display"] == []


def test_a_cell_out_of_its_time_is_its_error_and_the_next_runs(tmp_path: Path) -> None:
    cells = drive(tmp_path, ["x = 1", "while True:\n    pass", "print(x)"], cell_timeout=0.5)
    assert cells[1]["error"][0]["ename"] == "CellTimeout"
    assert cells[2]["stdout"] == "1\n"


def result(verdict: Verdict, files: dict[str, str], exit_code: int | None) -> EpisodeResult:
    return EpisodeResult(
        id="e",
        status=EpisodeStatus.completed,
        reward=1.0 if verdict is Verdict.passed else 0.0,
        verdict=verdict,
        exit_code=exit_code,
        files=files,
        timings=Timings(run_s=0.5),
    )


def test_the_answer_has_the_cells_or_says_why_there_are_none() -> None:
    written = json.dumps({"cells": [{"stdout": "1\n", "stderr": "", "display": [], "error": []}]})
    encoded = base64.b64encode(written.encode()).decode()
    fetched = base64.b64encode(b"x").decode()
    ran = run_jupyter_response(result(Verdict.passed, {RESULT: encoded, "o": fetched}, 0))
    assert ran.status == "Success" and ran.cells[0].stdout == "1\n"
    assert ran.files == {"o": fetched}  # the driver's own file is not the caller's
    assert ran.driver is not None and ran.driver.return_code == 0

    late = run_jupyter_response(result(Verdict.timeout, {}, None))
    assert (late.status, late.cells) == ("Failed", [])
    assert late.driver is not None and late.driver.status == "TimeLimitExceeded"

    died = run_jupyter_response(result(Verdict.failed, {}, 137))
    assert died.status == "Failed" and died.driver is not None and died.driver.return_code == 137

    broken = EpisodeResult(id="e", status=EpisodeStatus.failed, verdict=Verdict.infra_error)
    assert run_jupyter_response(broken).status == "SandboxError"
