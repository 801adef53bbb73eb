"""Files read back after the tests (`TestSpec.fetch`): the operation the grading plan ends
with, run by the real in-sandbox runner over a scratch tree, and the answer by the names the
task gave (regular files only: a directory, a link and a missing file are left out)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

from proctor.models import Limits, TaskSpec, TestFormat, TestSpec
from workers.evaluation.fetch import fetch_op, fetched
from workers.evaluation.grading import grading_plan
from workers.sandbox.protocol import Program, Reply, Results
from workers.sandbox.sandbox import BOOT, boot_input, runner_source


def task(fetch: list[str], output_bytes: int = 1 << 20) -> TaskSpec:
    return TaskSpec(
        image="python",
        tests=TestSpec(command="python3 main.py", format=TestFormat.exit_code, fetch=fetch),
        limits=Limits(output_bytes=output_bytes),
    )


def run_fetch(spec: TaskSpec, root: Path) -> dict[str, str]:
    """The plan's fetch operation, with / standing for `root`, through the runner."""
    op = fetch_op(spec)
    assert op is not None
    op = op.__class__(**{**op.wire(), "root": str(root)})
    program = Program([op])
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", BOOT],
        input=boot_input(runner_source()) + program.request("n"),
        capture_output=True,
        timeout=30,
        check=True,
    )
    reply = Reply.decode(json.loads(done.stdout))
    return fetched(spec, op, Results(program, reply))


def test_the_plan_ends_with_the_fetch_and_has_none_without_it() -> None:
    plan = grading_plan(task(["a.txt", "/mnt/b"]), keep=set(), restore={})
    assert plan.fetch is not None and plan.ops[-1] is plan.fetch
    assert plan.fetch.paths == ["workspace/a.txt", "mnt/b"]
    assert grading_plan(task([]), keep=set(), restore={}).fetch is None


def test_files_come_back_base64_by_the_names_the_task_gave(tmp_path: Path) -> None:
    (tmp_path / "workspace" / "dir").mkdir(parents=True)
    (tmp_path / "mnt").mkdir()
    (tmp_path / "workspace" / "a.txt").write_text("secret")
    (tmp_path / "mnt" / "b").write_bytes(b"\xff\x00sauce")
    (tmp_path / "workspace" / "big").write_text("x" * 1025)
    os.symlink(tmp_path / "workspace" / "a.txt", tmp_path / "workspace" / "link")
    spec = task(["a.txt", "/mnt/b", "dir", "link", "missing", "big"], output_bytes=1024)
    files = run_fetch(spec, tmp_path)
    assert {path: base64.b64decode(data) for path, data in files.items()} == {
        "a.txt": b"secret",
        "/mnt/b": b"\xff\x00sauce",
    }
