"""SandboxFusion's protocol (`POST /run_code`) translated to a one-shot episode and back.

verl's sandbox_fusion reward and tool (`reward_model.sandbox_fusion.url=.../run_code`),
ROLL and SkyRL speak this protocol. Field names, value spellings and status semantics are
SandboxFusion's:

| what happened                        | status       | run_result.status | return_code |
|--------------------------------------|--------------|-------------------|-------------|
| the program exited 0                 | Success      | Finished          | 0           |
| it exited non-zero (or was OOM-killed)| Failed      | Finished          | its code    |
| it ran out of `run_timeout`          | Failed       | TimeLimitExceeded | null        |
| screening caught it cheating         | Failed       | Finished          | its code/1  |
| our infrastructure failed            | SandboxError | (none)            |             |

The code runs as a one-shot episode (the worker screens it with the rule filter like any
solution) whose test command is the program, graded by exit code, within the time verl's
client waits (`service.adapters.deadline`). The routes are `service.routes.sandboxfusion`.
"""

from __future__ import annotations

import base64
import binascii
from enum import StrEnum

from pydantic import BaseModel, Field

from core.defaults import SANDBOXFUSION_ANSWER_MARGIN_S, SANDBOXFUSION_CLIENT_SLACK_S
from core.limits import HostMaxima
from proctor.models import (
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
from service.deps import Resources

STDIN_FILE = ".proctor-stdin"
OUTPUT_BYTES = 1 << 20  # SandboxFusion returns output whole; 1 MiB per stream here
DEFAULT_MEMORY_MB = 1024
# language → (file name, command); the python image has these interpreters
RUNNERS = {
    "python": ("main.py", "python3 main.py"),
    "pytest": ("test_main.py", "python3 -m pytest -q -p no:cacheprovider test_main.py"),
    "bash": ("main.sh", "bash main.sh"),
}


class RunStatus(StrEnum):
    # SandboxFusion's spellings (clients compare these strings), not our lowercase style
    Success = "Success"
    Failed = "Failed"
    SandboxError = "SandboxError"


class CommandRunStatus(StrEnum):
    Finished = "Finished"
    Error = "Error"
    TimeLimitExceeded = "TimeLimitExceeded"


class RunCodeRequest(BaseModel):
    compile_timeout: float = Field(10, description="compile timeout for compiled languages")
    run_timeout: float = Field(10, gt=0, description="code run timeout")
    memory_limit_MB: int = Field(-1, description="maximum memory allowed in megabytes")
    code: str = Field(description="the code to run")
    stdin: str | None = Field(None, description="optional string to pass into stdin")
    language: str = Field("python", description="the language or execution mode")
    files: dict[str, str | None] = Field(
        default_factory=dict, description="a dict from file path to base64 encoded content"
    )
    fetch_files: list[str] = Field(
        default_factory=list, description="not supported: always answered with no files"
    )


class CommandRunResult(BaseModel):
    status: CommandRunStatus
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunCodeResponse(BaseModel):
    status: RunStatus
    message: str
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)


class UnsupportedRequest(ValueError):
    """A request this deployment cannot run (a language, a binary file): a SandboxError."""


def run_code_episode(request: RunCodeRequest, maxima: HostMaxima | None = None) -> EpisodeCreate:
    runner = RUNNERS.get(request.language)
    if runner is None:
        raise UnsupportedRequest(
            f"language {request.language!r} is not available here; "
            f"this deployment runs {', '.join(sorted(RUNNERS))}"
        )
    code_file, command = runner
    files: dict[str, str] = {}
    for path, content in request.files.items():
        if content is None:  # SandboxFusion skips these too
            continue
        try:
            files[path] = base64.b64decode(content, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise UnsupportedRequest(
                f"file {path!r} is not base64 of UTF-8 text (binary files are not supported)"
            ) from exc
    tests: dict[str, str] = {}
    if request.stdin is not None:
        tests[STDIN_FILE] = request.stdin
        command += f" < {STDIN_FILE}"
    memory = request.memory_limit_MB if request.memory_limit_MB > 0 else DEFAULT_MEMORY_MB
    output_bytes = OUTPUT_BYTES
    if maxima is not None:  # what we choose, not what the caller asked, fits the deployment
        output_bytes = min(output_bytes, maxima.output_bytes)
        if request.memory_limit_MB <= 0:
            memory = min(memory, maxima.memory_mb)
    return EpisodeCreate(
        task=TaskSpec(
            image="python",
            files=files,
            tests=TestSpec(files=tests, command=command, format=TestFormat.exit_code),
            limits=Limits(
                timeout_s=request.run_timeout,
                memory_mb=min(max(memory, 32), 16_384),
                output_bytes=output_bytes,
            ),
        ),
        solution=Solution(files={code_file: request.code}),
        metadata={"trainer": "sandboxfusion", "language": request.language},
    )


def run_code_response(outcome: EpisodeResult | Exception) -> RunCodeResponse:
    if not isinstance(outcome, EpisodeResult) or outcome.reward is None:
        message = (
            str(outcome)
            if not isinstance(outcome, EpisodeResult)
            else (outcome.error or outcome.reason or f"the episode ended as {outcome.verdict}")
        )
        return RunCodeResponse(status=RunStatus.SandboxError, message=message)
    pod = outcome.sandbox.host
    time_s = outcome.timings.run_s
    if outcome.verdict is Verdict.timeout:
        run = CommandRunResult(
            status=CommandRunStatus.TimeLimitExceeded,
            execution_time=time_s,
            stdout=outcome.stdout,
            stderr=outcome.stderr,
        )
        return RunCodeResponse(
            status=RunStatus.Failed, message="", run_result=run, executor_pod_name=pod
        )
    code = outcome.exit_code
    if outcome.verdict is Verdict.cheat and code == 0:
        code = 1  # a cheat never passes, whatever it printed
    if outcome.verdict is Verdict.oom and code == 0:
        code = 137  # killed for memory, as a shell reports SIGKILL
    run = CommandRunResult(
        status=CommandRunStatus.Finished,
        execution_time=time_s,
        return_code=code,
        stdout=outcome.stdout,
        stderr=outcome.stderr,
    )
    status = RunStatus.Success if code == 0 else RunStatus.Failed
    return RunCodeResponse(status=status, message="", run_result=run, executor_pod_name=pod)


async def run_code(resources: Resources, request: RunCodeRequest) -> RunCodeResponse:
    """Run the program as an episode; SandboxFusion's answer, before verl's client gives up."""
    try:
        episode: EpisodeCreate | Exception = run_code_episode(
            request, HostMaxima.of(resources.settings)
        )
    except (UnsupportedRequest, ValueError) as exc:  # ValueError: pydantic refused a path
        return RunCodeResponse(status=RunStatus.SandboxError, message=str(exc))
    deadline = (
        request.compile_timeout
        + request.run_timeout
        + SANDBOXFUSION_CLIENT_SLACK_S
        - SANDBOXFUSION_ANSWER_MARGIN_S
    )
    deadline = min(deadline, resources.settings.max_wait_s)
    [outcome] = await run_within(resources, [episode], deadline)
    return run_code_response(outcome)
