"""SandboxFusion's protocol: `POST /run_code` and `GET /v1/ping`, run as Proctor episodes.

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
solution) whose test command is the program, graded by exit code. Also here: what the
adapter routes share — a token accepted in the URL (trainers' clients send no headers) and
`run_within`, which answers before the trainer's client gives up, always with a result.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from anyio import to_thread
from fastapi import APIRouter, Depends, Query
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field
from redis.exceptions import RedisError

from core.limits import HostMaxima
from proctor.integrations.codetasks import GroundTruthError
from proctor.models import (
    EpisodeCreate,
    EpisodeResult,
    EpisodeStatus,
    Limits,
    Solution,
    TaskSpec,
    TestFormat,
    TestSpec,
    Verdict,
)
from service.deps import Resources, ResourcesDep, require_token
from service.errors import ApiError, error_responses
from service.routes.episodes import check_images_runnable, validate_request, wait_for_end

log = logging.getLogger(__name__)

# verl's client waits compile_timeout + run_timeout + 10 s; answer with this much to spare
CLIENT_SLACK_S = 10.0
ANSWER_MARGIN_S = 2.0
# an episode's start-up (queue, container, files) and finish, beyond its time limit
START_MARGIN_S = 10.0
STDIN_FILE = ".proctor-stdin"
OUTPUT_BYTES = 1 << 20  # SandboxFusion returns output whole; 1 MiB per stream here
DEFAULT_MEMORY_MB = 1024
# language → (file name, command); the python image has these interpreters
RUNNERS = {
    "python": ("main.py", "python3 main.py"),
    "pytest": ("test_main.py", "python3 -m pytest -q -p no:cacheprovider test_main.py"),
    "bash": ("main.sh", "bash main.sh"),
}


# ---------------------------------------------------------------- shared by the adapters


_bearer = HTTPBearer(auto_error=False)


def adapter_auth(
    resources: ResourcesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    token: Annotated[
        str | None,
        Query(description="the bearer token, for trainer clients that cannot send headers"),
    ] = None,
) -> None:
    if credentials is None and token:
        credentials = HTTPAuthorizationCredentials(scheme="Bearer", credentials=token)
    require_token(resources, credentials)


AdapterAuthenticated = Depends(adapter_auth)


def _clamped(episode: EpisodeCreate, limit_s: float) -> EpisodeCreate:
    limits = episode.task.limits
    if limits.timeout_s <= limit_s:
        return episode
    task = episode.task.model_copy(update={"limits": limits.model_copy(
        update={"timeout_s": limit_s})})
    return episode.model_copy(update={"task": task})


async def run_within(
    resources: Resources, items: list[EpisodeCreate | Exception], deadline_s: float
) -> list[EpisodeResult | Exception]:
    """Run the episodes and answer within `deadline_s`, each slot a result or an error.

    Time limits are cut so an episode ends as `timeout` inside the deadline; one still
    unfinished at the deadline is ended: `timeout` if it was running, `infra_error` if it
    never got a sandbox (a backlog is our failure, not the answer's).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + deadline_s
    limit_s = max(1.0, min(deadline_s - min(START_MARGIN_S, 0.4 * deadline_s),
                           resources.settings.max_episode_s))
    slots: list[EpisodeResult | Exception | None] = []  # None: waits for its episode
    valid: list[EpisodeCreate] = []
    for item in items:
        if isinstance(item, Exception):
            slots.append(item)
            continue
        episode = _clamped(item, limit_s)
        try:
            validate_request(resources, episode)
        except ApiError as exc:  # the task asks what this deployment lacks: the data's fault
            slots.append(GroundTruthError(exc.message))
            continue
        valid.append(episode)
        slots.append(None)
    ended: list[EpisodeResult | Exception] = []
    try:
        if valid:
            await to_thread.run_sync(check_images_runnable, resources, valid)
        ids = await to_thread.run_sync(resources.queue.submit, valid) if valid else []
    except (ApiError, RedisError) as exc:  # no worker, backpressure, Redis: say so in the body
        log.warning("adapter: could not enqueue %d episodes: %s", len(valid), exc)
        ids, ended = [], [exc] * len(valid)
    remaining = max(deadline - loop.time(), 0.1)
    records = await asyncio.gather(*(wait_for_end(resources, i, remaining) for i in ids))
    for episode_id, record in zip(ids, records, strict=True):
        if record is not None and record.status.terminal:
            ended.append(record.public())
        else:
            ended.append(await to_thread.run_sync(end_at_deadline, resources, episode_id))
    results = iter(ended)
    return [next(results) if slot is None else slot for slot in slots]


def end_at_deadline(resources: Resources, episode_id: str) -> EpisodeResult:
    """End an episode the trainer can no longer wait for, and tell its worker to stop."""
    store = resources.store
    record = store.get(episode_id)
    if record is None:
        return EpisodeResult(id=episode_id, status=EpisodeStatus.failed,
                             verdict=Verdict.infra_error, error="the episode record is gone")
    if record.status.terminal:
        return record.public()
    ran = record.status in (EpisodeStatus.running, EpisodeStatus.evaluating)
    update: dict[str, Any] = (
        {"status": EpisodeStatus.completed, "verdict": Verdict.timeout, "reward": 0.0,
         "passed": False, "reason": "the trainer's deadline passed while it ran"}
        if ran else
        {"status": EpisodeStatus.failed, "verdict": Verdict.infra_error, "reward": None,
         "passed": None, "error": "no sandbox was free before the trainer's deadline"}
    )
    ended = record.public().model_copy(update={**update, "finished_at": datetime.now(UTC)})
    if store.finish(ended):
        return ended  # the worker holding its sandbox sees it ended and removes it
    latest = store.get(episode_id)  # it ended on its own meanwhile
    return latest.public() if latest is not None else ended


# ---------------------------------------------------------------- SandboxFusion's protocol


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
        default_factory=dict, description="a dict from file path to base64 encoded content")
    fetch_files: list[str] = Field(
        default_factory=list, description="not supported: always answered with no files")


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
            f"this deployment runs {', '.join(sorted(RUNNERS))}")
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
            limits=Limits(timeout_s=request.run_timeout, memory_mb=min(max(memory, 32), 16_384),
                          output_bytes=output_bytes),
        ),
        solution=Solution(files={code_file: request.code}),
        metadata={"trainer": "sandboxfusion", "language": request.language},
    )


def run_code_response(outcome: EpisodeResult | Exception) -> RunCodeResponse:
    if not isinstance(outcome, EpisodeResult) or outcome.reward is None:
        message = str(outcome) if not isinstance(outcome, EpisodeResult) else (
            outcome.error or outcome.reason or f"the episode ended as {outcome.verdict}")
        return RunCodeResponse(status=RunStatus.SandboxError, message=message)
    pod = outcome.sandbox.host
    time_s = outcome.timings.run_s
    if outcome.verdict is Verdict.timeout:
        run = CommandRunResult(status=CommandRunStatus.TimeLimitExceeded, execution_time=time_s,
                               stdout=outcome.stdout, stderr=outcome.stderr)
        return RunCodeResponse(status=RunStatus.Failed, message="", run_result=run,
                               executor_pod_name=pod)
    code = outcome.exit_code
    if outcome.verdict is Verdict.cheat and code == 0:
        code = 1  # a cheat never passes, whatever it printed
    if outcome.verdict is Verdict.oom and code == 0:
        code = 137  # killed for memory, as a shell reports SIGKILL
    run = CommandRunResult(status=CommandRunStatus.Finished, execution_time=time_s,
                           return_code=code, stdout=outcome.stdout, stderr=outcome.stderr)
    status = RunStatus.Success if code == 0 else RunStatus.Failed
    return RunCodeResponse(status=status, message="", run_result=run, executor_pod_name=pod)


router = APIRouter(tags=["sandboxfusion"])


@router.post("/run_code", operation_id="sandboxfusion_run_code", response_model=RunCodeResponse,
             dependencies=[AdapterAuthenticated],
             responses=error_responses(400, 401, 413, 422, 503))
async def run_code(request: RunCodeRequest, resources: ResourcesDep) -> RunCodeResponse:
    try:
        episode: EpisodeCreate | Exception = run_code_episode(
            request, HostMaxima.of(resources.settings))
    except (UnsupportedRequest, ValueError) as exc:  # ValueError: pydantic refused a path
        return RunCodeResponse(status=RunStatus.SandboxError, message=str(exc))
    deadline = request.compile_timeout + request.run_timeout + CLIENT_SLACK_S - ANSWER_MARGIN_S
    deadline = min(deadline, resources.settings.max_wait_s)
    [outcome] = await run_within(resources, [episode], deadline)
    return run_code_response(outcome)


@router.get("/v1/ping", operation_id="sandboxfusion_ping")
def ping() -> str:
    return "pong"
