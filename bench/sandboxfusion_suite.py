"""SandboxFusion's own runner tests replayed against Proctor's `/run_code` and `/run_jupyter`.

    python bench/sandboxfusion_suite.py [--tests DIR] [--files python,cpp,...] [--url URL]
                                        [--tree DIR]

Each of SandboxFusion's `sandbox/tests/runners/test_<name>.py` builds its requests with its
own pydantic models and posts them through FastAPI's `TestClient(app)`; its assertions are
its own. This script runs those files unchanged with pytest, in a scratch directory where:
  - `sandbox.server.sandbox_api`, `sandbox.server.server` and `sandbox.runners` are stand-ins
    holding the wire models the files import (the field names and defaults of SandboxFusion's
    requests and answers; no runner of its), and
  - `TestClient(app)` is an httpx client whose base URL is Proctor's,
so every request goes over HTTP to a Proctor deployment and every answer is judged by the
test that sent it. Proctor is `--url`, or a `proctor run` started from `--tree` (a checkout:
this one by default; an older one measures "before") on a scratch Redis database.

The result (per file: passed, failed, and each failure's first line) is printed and written
to bench/results/sandboxfusion_suite.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from harness import REPO_ROOT, machine, service, table, write

SF_TESTS = Path("/root/sf-bench/src/sandbox/tests/runners")
# the files of the languages Proctor claims (and the python isolation tests), and jupyter
DEFAULT_FILES = (
    "python,pytest,bash,cpp,java,junit,go,go_test,nodejs,typescript,rust,isolation,jupyter"
)
REQUEST_TIMEOUT_S = 180.0

# The stand-ins: SandboxFusion's request and answer models, by field name and default.
SANDBOX_API = """
from enum import Enum
from typing import Any, Dict, List, Optional

from pydantic import BaseModel


class CommandRunStatus(str, Enum):
    Finished = "Finished"
    Error = "Error"
    TimeLimitExceeded = "TimeLimitExceeded"


class CommandRunResult(BaseModel):
    status: CommandRunStatus
    execution_time: Optional[float] = None
    return_code: Optional[int] = None
    stdout: Optional[str] = None
    stderr: Optional[str] = None


class RunStatus(str, Enum):
    Success = "Success"
    Failed = "Failed"
    SandboxError = "SandboxError"


class RunCodeRequest(BaseModel):
    compile_timeout: float = 10
    run_timeout: float = 10
    memory_limit_MB: int = -1
    code: str
    stdin: Optional[str] = None
    language: str
    files: Dict[str, Optional[str]] = {}
    fetch_files: List[str] = []


class RunCodeResponse(BaseModel):
    status: RunStatus
    message: str
    compile_result: Optional[CommandRunResult] = None
    run_result: Optional[CommandRunResult] = None
    executor_pod_name: Optional[str] = None
    files: Dict[str, str] = {}


class RunJupyterRequest(BaseModel):
    cells: List[str]
    cell_timeout: float = 0
    total_timeout: float = 45
    memory_limit_MB: int = -1
    kernel: str = "python3"
    files: Dict[str, str] = {}
    fetch_files: List[str] = []


class CellRunResult(BaseModel):
    stdout: str
    stderr: str
    display: List[Dict[str, Any]]
    error: List[Dict[str, Any]]


class RunJupyterResponse(BaseModel):
    status: RunStatus
    message: str
    driver: Optional[CommandRunResult] = None
    cells: List[CellRunResult] = []
    executor_pod_name: Optional[str] = None
    files: Dict[str, str] = {}
"""
RUNNERS = "from sandbox.server.sandbox_api import CommandRunResult, CommandRunStatus\n"
SERVER = "app = None  # TestClient(app) is Proctor over HTTP (conftest.py)\n"
CONFTEST = f"""
import os

import fastapi.testclient
import httpx


def _proctor(app):
    return httpx.Client(base_url=os.environ["PROCTOR_SF_URL"], timeout={REQUEST_TIMEOUT_S})


fastapi.testclient.TestClient = _proctor
"""


def scratch(tests: Path, names: list[str], into: Path) -> list[str]:
    """The stand-in package, the conftest and the chosen test files in `into`."""
    package = into / "sandbox"
    for sub, text in (
        ("__init__.py", ""),
        ("runners/__init__.py", RUNNERS),
        ("server/__init__.py", ""),
        ("server/sandbox_api.py", SANDBOX_API),
        ("server/server.py", SERVER),
    ):
        (package / sub).parent.mkdir(parents=True, exist_ok=True)
        (package / sub).write_text(text)
    (into / "conftest.py").write_text(CONFTEST)
    files = []
    for name in names:
        source = tests / f"test_{name}.py"
        shutil.copy2(source, into / source.name)
        files.append(source.name)
    if (tests / "samples").is_dir():  # some files read their samples relative to themselves
        shutil.copytree(tests / "samples", into / "samples")
    return files


def outcomes(junit: Path) -> dict[str, dict[str, Any]]:
    """Per test file: passed, failed, and the failures' first lines, from pytest's JUnit XML."""
    per_file: dict[str, dict[str, Any]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("classname", "").rsplit(".", 1)[-1]
        row = per_file.setdefault(name, {"passed": 0, "failed": 0, "failures": {}})
        problem = next((c for c in case if c.tag in ("failure", "error")), None)
        if problem is None and case.find("skipped") is None:
            row["passed"] += 1
            continue
        row["failed"] += 1
        text = (problem.get("message") if problem is not None else "skipped") or ""
        row["failures"][case.get("name", "")] = text.splitlines()[0][:200] if text else ""
    return per_file


def replay(url: str, tests: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="sf-suite-") as directory:
        into = Path(directory)
        files = scratch(tests, names, into)
        junit = into / "junit.xml"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-o",
                "asyncio_mode=auto",
                "--rootdir",
                str(into),
                f"--junitxml={junit}",
                *files,
            ],
            cwd=into,
            env={**os.environ, "PROCTOR_SF_URL": url, "PYTHONPATH": str(into)},
            check=False,
        )
        return outcomes(junit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=Path, default=SF_TESTS, help="SandboxFusion's tests")
    parser.add_argument("--files", default=DEFAULT_FILES, help="test_<name>.py names, commas")
    parser.add_argument("--url", help="a running Proctor (else one is started from --tree)")
    parser.add_argument("--tree", type=Path, default=REPO_ROOT, help="the checkout to run")
    parser.add_argument("--label", default="", help="a name for this run in the results")
    args = parser.parse_args()
    names = [name for name in args.files.split(",") if name]
    if args.url:
        per_file = replay(args.url, args.tests, names)
    else:
        with service(tree=args.tree.resolve(), worker_concurrency="2") as url:
            per_file = replay(url, args.tests, names)
    rows = [
        {"file": f"{name}.py", **{k: v for k, v in row.items() if k != "failures"}}
        for name, row in sorted(per_file.items())
    ]
    passed = sum(row["passed"] for row in per_file.values())
    total = passed + sum(row["failed"] for row in per_file.values())
    print(table(rows, ["file", "passed", "failed"]))
    print(f"\n{passed} of {total} passed")
    for name, row in sorted(per_file.items()):
        for test, message in row["failures"].items():
            print(f"  FAIL {name}.py::{test}: {message}")
    path = write(
        f"sandboxfusion_suite{'-' + args.label if args.label else ''}",
        {
            "machine": machine(),
            "tree": str(args.tree),
            "url": args.url,
            "passed": passed,
            "total": total,
            "files": per_file,
        },
    )
    print(f"written: {path}")


if __name__ == "__main__":
    main()
