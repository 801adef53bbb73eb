"""SandboxFusion's `POST /run_jupyter`: notebook cells run in order in one Python namespace.

Served as a `/run_code` episode is, with the same guarantees: one fresh (or pooled) sandbox
of the Python image SandboxFusion's `python` runs in, no network, the rule filter screening
each cell (a cell is a solution file, `cells/cell_NNNN.py`), the request's memory limit and
`total_timeout` as the run's time. The program is `jupyter_driver.py` (a test file: it comes
in at grading), which runs the cells in one process and one namespace and writes each cell's
stdout, stderr, display data and error to a file the worker reads back (`TestSpec.fetch`).
There is no Jupyter kernel: what differs from one is in the driver's docstring.

| what happened                               | status       | driver            | cells |
|---------------------------------------------|--------------|-------------------|-------|
| the cells ran (a cell that raised included) | Success      | Finished, 0       | each  |
| the whole ran out of `total_timeout`        | Failed       | TimeLimitExceeded | none  |
| the driver died (os._exit, out of memory)   | Failed       | Finished, its code| none  |
| our infrastructure failed                   | SandboxError | (none)            | none  |
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from core.defaults import (
    SANDBOXFUSION_ANSWER_MARGIN_S,
    SANDBOXFUSION_CLIENT_SLACK_S,
)
from core.languages import language
from core.limits import HostMaxima
from proctor.models import (
    MAX_FETCH,
    EpisodeCreate,
    EpisodeResult,
    Limits,
    Solution,
    TaskSpec,
    TestFormat,
    TestSpec,
    Verdict,
)
from service.adapters.deadline import run_within
from service.adapters.sandboxfusion import (
    CommandRunResult,
    CommandRunStatus,
    RunStatus,
    UnsupportedRequest,
    decoded_files,
    fetchable,
    sandbox_error,
    sized,
)
from service.deps import Resources

DRIVER = "jupyter_driver.py"
CONFIG = ".proctor-jupyter.json"  # the driver's CONFIG
RESULT = ".proctor-jupyter-out.json"
CELLS = "cells/cell_{:04d}.py"
RESULT_BYTES = 8 << 20  # the per-cell outputs, PNG figures included
STREAM_CHARS = 1 << 20  # each cell's stdout and stderr, as SandboxFusion returns them whole


class RunJupyterRequest(BaseModel):
    cells: list[str] = Field(description="list of code blocks to run in jupyter notebook")
    cell_timeout: float = Field(0, description="max run time for each of the cells")
    total_timeout: float = Field(45, gt=0, description="max run time for all the cells")
    memory_limit_MB: int = Field(-1, description="maximum memory allowed in megabytes")
    kernel: Literal["python3"] = "python3"
    files: dict[str, str] = Field(
        default_factory=dict, description="a dict from file path to base64 encoded content"
    )
    fetch_files: list[str] = Field(
        default_factory=list, description="a list of file paths to fetch after code execution"
    )


class CellRunResult(BaseModel):
    stdout: str
    stderr: str
    display: list[dict[str, Any]]
    error: list[dict[str, Any]]


class RunJupyterResponse(BaseModel):
    status: RunStatus
    message: str
    driver: CommandRunResult | None = None
    cells: list[CellRunResult] = Field(default_factory=list)
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)


def driver_source() -> str:
    return Path(__file__).with_name("jupyter_driver.py").read_text()


def run_jupyter_episode(
    request: RunJupyterRequest, maxima: HostMaxima | None = None
) -> EpisodeCreate:
    lang = language("python")
    cells = {CELLS.format(index): source for index, source in enumerate(request.cells)}
    files, binary = decoded_files(request.files)
    config = {
        "cells": list(cells),
        "cell_timeout": max(request.cell_timeout, 0.0),
        "result": RESULT,
        "stream_chars": STREAM_CHARS,
    }
    memory, output_bytes = sized(request.memory_limit_MB, RESULT_BYTES, maxima)
    return EpisodeCreate(
        task=TaskSpec(
            image=lang.image,
            language=lang.name,
            files=files,
            tests=TestSpec(
                files={DRIVER: driver_source(), CONFIG: json.dumps(config)},
                binary_files=binary,
                command=f"MPLBACKEND=Agg python3 {DRIVER}",
                format=TestFormat.exit_code,
                fetch=[RESULT, *fetchable(request.fetch_files)][:MAX_FETCH],
            ),
            limits=Limits(
                timeout_s=request.total_timeout,
                memory_mb=min(max(memory, 32), 16_384),
                output_bytes=output_bytes,
            ),
        ),
        solution=Solution(files=cells or {CELLS.format(0): ""}),
        metadata={"trainer": "sandboxfusion", "endpoint": "run_jupyter"},
    )


def run_jupyter_response(outcome: EpisodeResult | Exception) -> RunJupyterResponse:
    if not isinstance(outcome, EpisodeResult) or outcome.reward is None:
        return RunJupyterResponse(status=RunStatus.SandboxError, message=sandbox_error(outcome))
    pod = outcome.sandbox.host
    files = dict(outcome.files)
    written = files.pop(RESULT, None)
    timed_out = outcome.verdict is Verdict.timeout
    driver = CommandRunResult(
        status=CommandRunStatus.TimeLimitExceeded if timed_out else CommandRunStatus.Finished,
        execution_time=outcome.timings.run_s,
        return_code=None if timed_out else outcome.exit_code,
        stdout=outcome.stdout,
        stderr=outcome.stderr,
    )
    cells = _cells(written) if written is not None and not timed_out else None
    if cells is None:
        return RunJupyterResponse(
            status=RunStatus.Failed, message="", driver=driver, executor_pod_name=pod
        )
    return RunJupyterResponse(
        status=RunStatus.Success,
        message="",
        driver=driver,
        cells=cells,
        executor_pod_name=pod,
        files=files,
    )


def _cells(written: str) -> list[CellRunResult] | None:
    """The driver's per-cell outputs; None when the file is not what it writes."""
    try:
        data = json.loads(base64.b64decode(written))
        return [CellRunResult.model_validate(cell) for cell in data["cells"]]
    except (ValueError, TypeError, KeyError, ValidationError):
        return None


async def run_jupyter(resources: Resources, request: RunJupyterRequest) -> RunJupyterResponse:
    try:
        episode: EpisodeCreate | Exception = run_jupyter_episode(
            request, HostMaxima.of(resources.settings)
        )
    except (UnsupportedRequest, ValueError) as exc:  # ValueError: pydantic refused a path
        return RunJupyterResponse(status=RunStatus.SandboxError, message=str(exc))
    deadline = request.total_timeout + SANDBOXFUSION_CLIENT_SLACK_S - SANDBOXFUSION_ANSWER_MARGIN_S
    deadline = min(deadline, resources.settings.max_wait_s)
    [outcome] = await run_within(resources, [episode], deadline)
    return run_jupyter_response(outcome)
