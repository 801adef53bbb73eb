"""SandboxFusion's protocol (`POST /run_code`) translated to a one-shot episode and back.

verl's sandbox_fusion reward and tool (`reward_model.sandbox_fusion.url=.../run_code`),
ROLL and SkyRL speak this protocol. Field names, value spellings and status semantics are
SandboxFusion's:

| what happened                  | status       | compile_result    | run_result        | code  |
|--------------------------------|--------------|-------------------|-------------------|-------|
| the program exited 0           | Success      | Finished, 0 (*)   | Finished          | 0     |
| it exited non-zero             | Failed       | Finished, 0 (*)   | Finished          | its   |
| it was killed for memory       | Failed       | Finished, 0 (*)   | MemoryLimitExceeded | 137 |
| it ran out of `run_timeout`    | Failed       | Finished, 0 (*)   | TimeLimitExceeded | null  |
| it does not compile            | Failed       | Finished, its code| (none)            |       |
| compiling ran out of time      | Failed       | TimeLimitExceeded | (none)            |       |
| screening caught it cheating   | Failed       | Finished, 0 (*)   | Finished          | its/1 |
| our infrastructure failed      | SandboxError | (none)            | (none)            |       |

(*) compiled languages only (`core.languages`); interpreted ones have no compile_result.
A `language` not in the table is refused as SandboxFusion refuses it, a 422 naming the
known ones (not a SandboxError: trainers retry those). One of SandboxFusion's own that this
deployment cannot run (`core.languages.UNAVAILABLE`: julia, swift, lean, cuda, python_gpu)
is a SandboxError saying why, as SandboxFusion answers a runner that cannot run: the code is
not at fault, so the trainer drops the sample instead of learning a zero.

The code runs as a one-shot episode (the worker screens it with the rule filter like any
solution) in its language's image, with `task.language` set so a compiled language compiles
in its own step (`workers.evaluation.grading`), whose test command is the program, graded by
exit code, within the time verl's client waits (`service.adapters.deadline`). `files` are
base64: text ones go into the workspace with the task, others (binary) with the tests.
`fetch_files` are read back after the run (`TestSpec.fetch`) and answered in `files`, base64,
by the names the request gave: relative to the workspace, or absolute under /workspace, /mnt
(writable, as in SandboxFusion's image, and emptied with the episode) or /tmp. One that is
missing, not a regular file, over the output limit or elsewhere is left out, as SandboxFusion
leaves out what it does not find. The routes are `service.routes.sandboxfusion`.

Proctor's extension, code-contest judging (`proctor.judging`): a request with `cases`
(`[{stdin, expected_stdout}]`) runs the program once per case in one sandbox, compiled once,
each case with `run_timeout`, `memory_limit_MB` and `stack_limit_MB` (default: the memory
limit), judged by `comparison` (`lines` by default; `float` with `abs_tolerance` and
`rel_tolerance`) or by a `checker` (`{language: cpp|python, source}`, testlib's
conventions). The answer adds `cases` (each case's `verdict`, `execution_time`, `message`),
`accepted` and `score` (the fraction accepted): a trainer that wants all-or-nothing reads
`status` (`Success` only when every case is accepted), one that wants partial credit reads
`score`. `run_result` then summarises the first case that failed (`TimeLimitExceeded`,
`MemoryLimitExceeded`, `OutputLimitExceeded`, else `Finished`); `stdin` is ignored.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from enum import StrEnum

from pydantic import BaseModel, Field, field_validator

from core import languages
from core.defaults import (
    RUN_CODE_MEMORY_MB,
    SANDBOXFUSION_ANSWER_MARGIN_S,
    SANDBOXFUSION_CLIENT_SLACK_S,
)
from core.limits import HostMaxima
from proctor.judging import CaseVerdict, Checker, Comparison, JudgeSpec, StdioCase
from proctor.models import (
    JUDGED_OUTPUT_BYTES,
    MAX_FETCH,
    EpisodeCreate,
    EpisodeResult,
    Limits,
    Scoring,
    Solution,
    TaskSpec,
    TestFormat,
    TestSpec,
    Verdict,
    check_fetch_path,
)
from service.adapters.deadline import run_within
from service.deps import Resources
from service.errors import GatewayTimeout, Overloaded
from service.idempotency import keyed

STDIN_FILE = ".proctor-stdin"
# SandboxFusion runs these with no compile step (`go test`, `tsx`), all within run_timeout:
# their compile step here gets the larger of the two timeouts, so a request SandboxFusion
# runs is not refused a compile it never limited
NO_COMPILE_STEP = frozenset({"go_test", "typescript"})
OUTPUT_BYTES = 1 << 20  # SandboxFusion returns output whole; 1 MiB per stream here
DEFAULT_MEMORY_MB = RUN_CODE_MEMORY_MB
MIN_TIMEOUT_S = 0.1  # SandboxFusion takes any number; a limit must be positive


class RunStatus(StrEnum):
    # SandboxFusion's spellings (clients compare these strings), not our lowercase style
    Success = "Success"
    Failed = "Failed"
    SandboxError = "SandboxError"


class CommandRunStatus(StrEnum):
    Finished = "Finished"
    Error = "Error"
    TimeLimitExceeded = "TimeLimitExceeded"
    # Proctor's: SandboxFusion reports these as Finished (137) or not at all
    MemoryLimitExceeded = "MemoryLimitExceeded"
    OutputLimitExceeded = "OutputLimitExceeded"


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
        default_factory=list, description="a list of file paths to fetch after code execution"
    )
    # Proctor's extension: code-contest judging (see the module's docstring)
    cases: list[StdioCase] | None = Field(
        None, description="stdin cases judged in one sandbox, one compile (Proctor's)"
    )
    comparison: Comparison = Comparison.lines
    abs_tolerance: float = Field(1e-6, ge=0)
    rel_tolerance: float = Field(1e-6, ge=0)
    checker: Checker | None = None
    stack_limit_MB: int | None = Field(None, ge=1, le=16_384)

    @field_validator("language")
    @classmethod
    def _known(cls, name: str) -> str:
        if name in languages.UNAVAILABLE:
            return name  # SandboxFusion's name: answered by `run_code`, not refused
        languages.language(name)  # UnknownLanguage is a ValueError: a 422, as SandboxFusion's
        return name


class CommandRunResult(BaseModel):
    status: CommandRunStatus
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class CaseResult(BaseModel):
    verdict: CaseVerdict
    execution_time: float
    message: str | None = None


class RunCodeResponse(BaseModel):
    status: RunStatus
    message: str
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    # Proctor's, with `cases`: each case's verdict, how many were accepted, their fraction
    cases: list[CaseResult] | None = None
    accepted: int | None = None
    score: float | None = None


class UnsupportedRequest(ValueError):
    """A request this deployment cannot run (a file that is not base64): a SandboxError."""


def run_code_episode(request: RunCodeRequest, maxima: HostMaxima | None = None) -> EpisodeCreate:
    lang = languages.language(request.language)
    code_file = languages.source_for(lang, request.code)
    command = lang.run
    files, binary = decoded_files(request.files)
    compile_timeout = request.compile_timeout
    if lang.name in NO_COMPILE_STEP:
        compile_timeout = max(compile_timeout, request.run_timeout)
    tests: dict[str, str] = {}
    judge = judge_of(request)
    fetch = fetchable(request.fetch_files)
    if request.stdin is not None and judge is None:
        tests[STDIN_FILE] = request.stdin
        command += f" < {STDIN_FILE}"
    image = lang.image
    if judge is not None and judge.checker is not None and judge.checker.language == "cpp":
        image = "cpp"  # g++ and testlib.h; python3 (without numpy) is there too
    output_bytes = OUTPUT_BYTES
    if judge is not None:  # every case's stdout comes back in one record
        output_bytes = min(output_bytes, JUDGED_OUTPUT_BYTES // len(judge.cases))
    memory, output_bytes = sized(request.memory_limit_MB, output_bytes, maxima)
    return EpisodeCreate(
        task=TaskSpec(
            image=image,
            language=lang.name,
            files=files,
            tests=(
                TestSpec(format=TestFormat.cases, judge=judge, fetch=fetch)
                if judge is not None
                else TestSpec(
                    files=tests,
                    binary_files=binary,
                    command=command,
                    format=TestFormat.exit_code,
                    fetch=fetch,
                )
            ),
            scoring=Scoring.partial,
            limits=Limits(
                timeout_s=request.run_timeout,
                compile_timeout_s=max(compile_timeout, MIN_TIMEOUT_S),
                memory_mb=min(max(memory, 32), 16_384),
                output_bytes=output_bytes,
            ),
        ),
        solution=Solution(files={code_file: request.code}),
        metadata={"trainer": "sandboxfusion", "language": request.language},
    )


def decoded_files(encoded: Mapping[str, str | None]) -> tuple[dict[str, str], dict[str, str]]:
    """A request's base64 files: (text files, binary files still base64); a `None` is
    skipped, as SandboxFusion skips it; one that is not base64 is an UnsupportedRequest."""
    files: dict[str, str] = {}
    binary: dict[str, str] = {}
    for path, content in encoded.items():
        if content is None:
            continue
        try:
            data = base64.b64decode(content, validate=True)
        except binascii.Error as exc:
            raise UnsupportedRequest(f"file {path!r} is not base64 ({exc})") from exc
        try:
            files[path] = data.decode("utf-8")
        except UnicodeDecodeError:
            binary[path] = base64.b64encode(data).decode("ascii")
    return files, binary


def sized(memory_limit_mb: int, output_bytes: int, maxima: HostMaxima | None) -> tuple[int, int]:
    """The memory (the caller's `memory_limit_MB`, else ours) and output a request runs
    with: what we choose, not what the caller asked, fits the deployment's maxima."""
    memory = memory_limit_mb if memory_limit_mb > 0 else DEFAULT_MEMORY_MB
    if maxima is not None:
        output_bytes = min(output_bytes, maxima.output_bytes)
        if memory_limit_mb <= 0:
            memory = min(memory, maxima.memory_mb)
    return memory, output_bytes


def fetchable(paths: list[str]) -> list[str]:
    """The paths that can be read back (the others are answered as missing), at most
    MAX_FETCH of them, each once."""
    kept: list[str] = []
    for path in dict.fromkeys(paths):
        try:
            kept.append(check_fetch_path(path))
        except ValueError:
            continue
    return kept[:MAX_FETCH]


def judge_of(request: RunCodeRequest) -> JudgeSpec | None:
    if request.cases is None:
        return None
    return JudgeSpec(
        cases=request.cases,
        comparison=request.comparison,
        abs_tolerance=request.abs_tolerance,
        rel_tolerance=request.rel_tolerance,
        checker=request.checker,
        stack_mb=request.stack_limit_MB,
    )


_CASE_STATUS = {
    CaseVerdict.time_limit: CommandRunStatus.TimeLimitExceeded,
    CaseVerdict.memory_limit: CommandRunStatus.MemoryLimitExceeded,
    CaseVerdict.output_limit: CommandRunStatus.OutputLimitExceeded,
}


def judged_response(
    outcome: EpisodeResult, built: CommandRunResult | None, pod: str | None
) -> RunCodeResponse:
    """The answer to a request with `cases`: each case's verdict, their count and fraction."""
    cases = [
        CaseResult(
            verdict=t.verdict or CaseVerdict.skipped,
            execution_time=t.duration_s,
            message=t.message,
        )
        for t in outcome.tests
    ]
    accepted = sum(c.verdict is CaseVerdict.accepted for c in cases)
    failed = next((c for c in cases if c.verdict is not CaseVerdict.accepted), None)
    run = CommandRunResult(
        status=_CASE_STATUS.get(failed.verdict, CommandRunStatus.Finished)
        if failed
        else CommandRunStatus.Finished,
        execution_time=sum(c.execution_time for c in cases),
        stdout="",
        stderr=outcome.reason if failed else "",
    )
    return RunCodeResponse(
        status=RunStatus.Success if outcome.passed else RunStatus.Failed,
        message="" if outcome.passed else outcome.reason,
        compile_result=built,
        run_result=run,
        executor_pod_name=pod,
        files=outcome.files,
        cases=cases,
        accepted=accepted,
        score=accepted / max(len(cases), 1),
    )


def sandbox_error(outcome: EpisodeResult | Exception) -> str:
    """The message of a SandboxError answer: an outcome with no reward, or the exception."""
    if not isinstance(outcome, EpisodeResult):
        return str(outcome)
    return outcome.error or outcome.reason or f"the episode ended as {outcome.verdict}"


def run_code_response(
    outcome: EpisodeResult | Exception, *, compiled: bool = False
) -> RunCodeResponse:
    """SandboxFusion's answer for an episode's outcome; `compiled`: its language compiles."""
    if not isinstance(outcome, EpisodeResult) or outcome.reward is None:
        return RunCodeResponse(status=RunStatus.SandboxError, message=sandbox_error(outcome))
    pod = outcome.sandbox.host
    compile_s = outcome.timings.compile_s
    if compiled and outcome.verdict is Verdict.compile_error:
        # no run: the compiler's output and status, where SandboxFusion puts them
        timed_out = outcome.exit_code is None
        failed = CommandRunResult(
            status=CommandRunStatus.TimeLimitExceeded if timed_out else CommandRunStatus.Finished,
            execution_time=compile_s,
            return_code=outcome.exit_code,
            stdout=outcome.stdout,
            stderr=outcome.stderr,
        )
        return RunCodeResponse(
            status=RunStatus.Failed,
            message="",
            compile_result=failed,
            executor_pod_name=pod,
            files=outcome.files,
        )
    built = (
        CommandRunResult(
            status=CommandRunStatus.Finished,
            execution_time=compile_s,
            return_code=0,
            stdout="",
            stderr="",
        )
        if compiled
        else None
    )
    if outcome.tests and outcome.tests[0].verdict is not None:  # a request with `cases`
        return judged_response(outcome, built, pod)
    time_s = outcome.timings.run_s
    if time_s is not None and compile_s is not None:
        time_s = max(time_s - compile_s, 0.0)
    if outcome.verdict is Verdict.timeout:
        run = CommandRunResult(
            status=CommandRunStatus.TimeLimitExceeded,
            execution_time=time_s,
            stdout=outcome.stdout,
            stderr=outcome.stderr,
        )
        return RunCodeResponse(
            status=RunStatus.Failed,
            message="",
            compile_result=built,
            run_result=run,
            executor_pod_name=pod,
            files=outcome.files,
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
    if outcome.verdict is Verdict.oom:
        run = run.model_copy(update={"status": CommandRunStatus.MemoryLimitExceeded})
    status = RunStatus.Success if code == 0 else RunStatus.Failed
    return RunCodeResponse(
        status=status,
        message="",
        compile_result=built,
        run_result=run,
        executor_pod_name=pod,
        files=outcome.files,
    )


async def run_code(
    resources: Resources,
    request: RunCodeRequest,
    *,
    idempotency_key: str | None = None,
    share_identical: bool = False,
) -> RunCodeResponse:
    """Run the program as an episode; SandboxFusion's answer, before verl's client gives up.
    A call shares an earlier one's episode only under `service.idempotency`'s rules."""
    why = languages.UNAVAILABLE.get(request.language)
    if why is not None:
        message = f"language {request.language!r} is not available on this deployment: {why}"
        return RunCodeResponse(status=RunStatus.SandboxError, message=message)
    try:
        episode: EpisodeCreate | Exception = keyed(
            run_code_episode(request, HostMaxima.of(resources.settings)),
            idempotency_key,
            share_identical=share_identical,
        )
    except (UnsupportedRequest, ValueError) as exc:  # ValueError: pydantic refused a path
        return RunCodeResponse(status=RunStatus.SandboxError, message=str(exc))
    judge = judge_of(request)
    running = judge.run_seconds(request.run_timeout) if judge is not None else request.run_timeout
    deadline = (  # what the client waits: its own compile_timeout, whatever ours is
        request.compile_timeout
        + running
        + SANDBOXFUSION_CLIENT_SLACK_S
        - SANDBOXFUSION_ANSWER_MARGIN_S
    )
    deadline = min(deadline, resources.settings.max_wait_s)
    [outcome] = await run_within(resources, [episode], deadline)
    if isinstance(outcome, Overloaded):
        # the queue is longer than the client waits: SandboxFusion's overload answer (its
        # gateway's), the one status verl's client retries; a 429 or a SandboxError it
        # would score as the sample's failure
        raise GatewayTimeout(outcome.message, headers=outcome.headers)
    return run_code_response(outcome, compiled=languages.language(request.language).compiled)
