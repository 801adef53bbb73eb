"""The wire contract: every request and result that crosses the HTTP API or a queue.

Defined once here and imported by `service`, `workers` and the client, so the three can
never disagree on a field. Request models forbid unknown fields (a typo is a 422, not a
silently ignored option); result models allow them, so older clients keep working.
"""

from __future__ import annotations

import base64
import binascii
import posixpath
import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.config import JsonDict

from proctor.imageref import check_reference, is_reference
from proctor.judging import CaseVerdict, JudgeSpec

__all__ = [
    "LANGUAGE_NAMES",
    "MAX_FETCH",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "Action",
    "BashAction",
    "CheatCategory",
    "CheatReport",
    "Decision",
    "EpisodeCreate",
    "EpisodeCreated",
    "EpisodeExport",
    "EpisodeListed",
    "EpisodeMode",
    "EpisodePage",
    "EpisodeRegrade",
    "EpisodeResult",
    "EpisodeResults",
    "EpisodeStatus",
    "Evidence",
    "EvidenceSource",
    "GiveUpAction",
    "InteractiveAction",
    "Level",
    "Limits",
    "NetworkPolicy",
    "NewProtectedFiles",
    "Observation",
    "Policy",
    "ReadFileAction",
    "RepoCreated",
    "RepoSnapshot",
    "SandboxInfo",
    "Scoring",
    "ScreenItem",
    "ScreenRequest",
    "ScreenResponse",
    "ScreenVerdict",
    "Solution",
    "Step",
    "StepResult",
    "TaskContext",
    "TaskSpec",
    "TestCase",
    "TestFormat",
    "TestOutcome",
    "TestSpec",
    "Timings",
    "Verdict",
    "WriteFileAction",
]

MAX_FILES = 2_000
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_PATH_CHARS = 512
MAX_FETCH = 32  # files read back after the tests (`TestSpec.fetch`)
# where a file read back may be: the workspace, and the scratch mounts an episode owns
FETCH_ROOTS = ("/workspace/", "/mnt/", "/tmp/")


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Result(BaseModel):
    model_config = ConfigDict(extra="allow")


def check_relative_path(path: str) -> str:
    """A file name the sandbox may write: relative, inside the workspace, no tricks."""
    if not path or len(path) > MAX_PATH_CHARS:
        raise ValueError(f"path must be 1..{MAX_PATH_CHARS} characters")
    if "\x00" in path or "\\" in path:
        raise ValueError(f"path {path!r} contains a NUL byte or a backslash")
    if path.startswith("/"):
        raise ValueError(f"path {path!r} is absolute; paths are relative to the workspace")
    normal = posixpath.normpath(path)
    if normal == "." or normal.startswith("../") or normal == "..":
        raise ValueError(f"path {path!r} leaves the workspace")
    if any(part == ".." for part in path.split("/")):
        raise ValueError(f"path {path!r} contains '..'")
    return normal


def check_fetch_path(path: str) -> str:
    """A file to read back after the run: relative to the workspace, or absolute under one
    of FETCH_ROOTS; kept as given (the result names it so)."""
    if path.startswith("/"):
        normal = posixpath.normpath(path)
        if not normal.startswith(FETCH_ROOTS) or any(p == ".." for p in path.split("/")):
            raise ValueError(f"path {path!r} is not under {', '.join(FETCH_ROOTS)}")
        check_relative_path(normal.lstrip("/"))
        return path
    check_relative_path(path)
    return path


def _check_files(files: dict[str, str]) -> dict[str, str]:
    if len(files) > MAX_FILES:
        raise ValueError(f"at most {MAX_FILES} files per request")
    checked: dict[str, str] = {}
    for path, content in files.items():
        if len(content.encode()) > MAX_FILE_BYTES:
            raise ValueError(f"file {path!r} is larger than {MAX_FILE_BYTES} bytes")
        checked[check_relative_path(path)] = content
    return checked


_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_SPACE = b" \t\n\r\x0b\x0c"


def check_base64(value: str | None) -> str | None:
    """Refuse at the edge what the worker could not decode (it would end as our failure).

    Line breaks and spaces are allowed, as `base64` wraps its output; the size is bounded
    by the field's `max_length` and the body limit.
    """
    if value is None or (len(value) % 4 == 0 and _BASE64.fullmatch(value)):
        return value
    try:
        base64.b64decode(value.encode("ascii").translate(None, _SPACE), validate=True)
    except (binascii.Error, ValueError) as exc:  # ValueError: not even ASCII
        raise ValueError(f"not base64 ({exc})") from None
    return value


# What an archive or a bundle starts with: decoding a few hundred bytes at the edge tells a
# tar (plain or compressed) or a git bundle from anything else, which the worker could
# only fail on later
_COMPRESSED = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")  # what tarfile's "r:*" opens
_TAR_MAGIC = slice(257, 262)
_BUNDLE_HEADS = (b"# v2 git bundle\n", b"# v3 git bundle\n")
_HEAD_CHARS = 352  # 264 decoded bytes: past the tar header's magic


def _head(value: str) -> bytes:
    text = value[: _HEAD_CHARS * 2].encode("ascii").translate(None, _SPACE)
    return base64.b64decode(text[:_HEAD_CHARS])


def check_archive(value: str | None) -> str | None:
    value = check_base64(value)
    if value is not None:
        head = _head(value)
        if not head.startswith(_COMPRESSED) and head[_TAR_MAGIC] != b"ustar":
            raise ValueError("not a tar archive (plain, gzip, bzip2 or xz)")
    return value


def check_bundle(value: str | None) -> str | None:
    value = check_base64(value)
    if value is not None and not _head(value).startswith(_BUNDLE_HEADS):
        raise ValueError("not a git bundle (`git bundle create` output, v2 or v3)")
    return value


# ---------------------------------------------------------------------------- the task


class Limits(_Request):
    """Resource limits of one sandbox. Defaults suit a unit-test-sized program.

    A deployment may allow less than these bounds (its `PROCTOR_MAX_*` settings, by default
    derived from its hosts): a request over its maxima is a 422 that names them.
    """

    timeout_s: float = Field(10.0, gt=0, le=3600, description="wall clock for running the tests")
    compile_timeout_s: float = Field(
        10.0, gt=0, le=3600, description="wall clock for compiling (compiled languages only)"
    )
    memory_mb: int = Field(512, ge=32, le=16_384, description="memory; swap is not allowed")
    cpus: float = Field(1.0, ge=0.01, le=16, description="Docker's CPU quota takes 0.01 and up")
    pids: int = Field(128, ge=16, le=4096)
    output_bytes: int = Field(
        65_536,
        ge=1024,
        le=16 * 1024 * 1024,
        description="per stream, counted JSON-escaped (a control or non-ASCII character: \\uXXXX)",
    )
    disk_mb: int = Field(256, ge=16, le=8192, description="size of the writable workspace")


class TestFormat(StrEnum):
    __test__ = False  # not a pytest test class

    junit = "junit"
    exit_code = "exit_code"  # pass: the command exited 0 (forgeable by an early `sys.exit(0)`)
    # the `.py` test files run in name order as plain programs, the solution importable; pass:
    # they all ran to their end, which a grader's completion marker attests (no pytest, no
    # command of the task's own)
    assert_ = "assert"
    # stdin/stdout cases judged one by one (`judge`, `proctor.judging`): the program is the
    # task's `language`, compiled once
    cases = "cases"


class TestSpec(_Request):
    """The hidden tests: never in the sandbox while the solution or agent acts."""

    __test__: ClassVar[bool] = False  # not a pytest test class

    files: dict[str, str] = Field(default_factory=dict)
    command: str | None = Field(
        None,
        max_length=4096,
        description="defaults to pytest over `files`; with format=junit, pytest commands get "
        "--junitxml added, other commands write JUnit XML to $PROCTOR_JUNIT_XML",
    )
    format: TestFormat = TestFormat.junit
    binary_files: dict[str, str] = Field(
        default_factory=dict, description="path → base64 content, written with the tests"
    )
    fail_to_pass: list[str] = Field(
        default_factory=list, description="tests that must pass (SWE-bench FAIL_TO_PASS)"
    )
    pass_to_pass: list[str] = Field(
        default_factory=list, description="tests that must keep passing (SWE-bench PASS_TO_PASS)"
    )
    fetch: list[str] = Field(
        default_factory=list,
        max_length=MAX_FETCH,
        description="files read back after the tests (relative to the workspace, or under "
        "/workspace, /mnt or /tmp), returned base64 in the result's `files`; one that is "
        "missing, not a regular file or over `limits.output_bytes` is left out",
    )
    judge: JudgeSpec | None = Field(None, description="format `cases`: the cases and how to judge")

    _files = field_validator("files")(_check_files)

    @field_validator("fetch")
    @classmethod
    def _check_fetch(cls, paths: list[str]) -> list[str]:
        return [check_fetch_path(path) for path in paths]

    @field_validator("binary_files")
    @classmethod
    def _check_binary(cls, files: dict[str, str]) -> dict[str, str]:
        for content in files.values():
            check_base64(content)
        return _check_files(files)

    @model_validator(mode="after")
    def _assert_runs_its_files(self) -> TestSpec:
        if self.format is TestFormat.assert_ and self.command is not None:
            raise ValueError("format `assert` runs the `.py` test files itself: give no command")
        if (self.format is TestFormat.cases) != (self.judge is not None):
            raise ValueError("format `cases` and `judge` go together")
        return self


class RepoSnapshot(_Request):
    """A repository the agent works in, given one way: inline (`archive`, `bundle`), uploaded
    once (`ref`, from `POST /v1/repos`), or baked into the task image (`path`). Sealed to the
    base commit's past before the agent sees it (docs/repositories.md)."""

    archive: str | None = Field(
        None, max_length=64 << 20, description="base64 of a tar(.gz) of a working tree with .git"
    )
    bundle: str | None = Field(None, max_length=64 << 20, description="base64 of a git bundle")
    ref: str | None = Field(
        None,
        pattern=r"^sha256:[0-9a-f]{64}$",
        description="a sealed upload's reference, as `POST /v1/repos` answered it",
    )
    path: str | None = Field(
        None,
        max_length=MAX_PATH_CHARS,
        description="an absolute path of a git repository inside `task.image` (`/testbed`)",
    )
    base_commit: str = Field(
        "",
        pattern=r"^([0-9a-fA-F]{7,64})?$",
        description="required, except with `ref` (whose upload named it)",
    )
    branch: str = Field("main", pattern=r"^[A-Za-z0-9._/-]{1,100}$")

    _archive = field_validator("archive")(check_archive)
    _bundle = field_validator("bundle")(check_bundle)

    @field_validator("path")
    @classmethod
    def _check_path(cls, path: str | None) -> str | None:
        if path is not None:
            check_image_repo_path(path)
        return path

    @model_validator(mode="after")
    def _one_source(self) -> RepoSnapshot:
        given = [self.archive, self.bundle, self.ref, self.path]
        if sum(v is not None for v in given) != 1:
            raise ValueError(
                "give the repository as exactly one of `archive`, `bundle`, `ref` or `path`"
            )
        if not self.base_commit and self.ref is None:
            raise ValueError("`base_commit` is required (except with `ref`)")
        return self


# where a sandbox mounts its own directories: a repository baked there could not be shown
_SANDBOX_MOUNTS = ("/workspace", "/home/sandbox", "/tmp", "/proc", "/sys", "/dev", "/etc")


def check_image_repo_path(path: str) -> str:
    """An absolute, normal path, outside what the sandbox mounts itself."""
    if not path.startswith("/") or posixpath.normpath(path) != path or path == "/":
        raise ValueError(f"`path` must be an absolute, normalized path below /, not {path!r}")
    if any(path == m or path.startswith(m + "/") for m in _SANDBOX_MOUNTS) or "\0" in path:
        raise ValueError(f"`path` may not be under {', '.join(_SANDBOX_MOUNTS)}: {path!r}")
    return path


class Scoring(StrEnum):
    binary = "binary"
    partial = "partial"


class NetworkPolicy(StrEnum):
    auto = "auto"  # the honeypot network when one is up, else none
    none = "none"
    honeypot = "honeypot"


class NewProtectedFiles(StrEnum):
    """What grading does with a file the agent added under a protected directory."""

    grade = "grade"  # it runs beside the hidden tests (a new regression test is honest work)
    remove = "remove"  # it is deleted before the hidden tests run


class Isolation(StrEnum):
    """How a one-shot episode is kept apart from others, weakest first."""

    pooled = "pooled"  # a fresh uid, session and directories in a long-lived sandbox
    container = "container"  # a fresh container of its own


class Policy(_Request):
    """How cheating is screened and paid."""

    network: NetworkPolicy = NetworkPolicy.auto
    cheat_reward: float = 0.0
    intercept_penalty: float = Field(
        -1.0,
        description="step reward at each step with an attempt or a cheat (intercepted, a "
        "review no judge decided, a honeypot contact made during it); the episode's "
        "reward stays its merit unless a cheat decides it",
    )
    disabled_rules: list[str] = Field(
        default_factory=list, description="rule ids or patterns (`res.*`, `*`) to switch off"
    )
    judge: bool = True
    attempts_are_cheats: bool = Field(
        False,
        description="an attempt (a rule's hit that structure answered, a review no judge "
        "decided, a honeypot contact) makes the episode a cheat too, not only a step "
        "penalty; resource exhaustion never does",
    )
    give_up_reward: float = Field(
        0.0, description="the reward of an interactive episode the agent ended by `give_up`"
    )
    new_protected_files: NewProtectedFiles = Field(
        NewProtectedFiles.grade,
        description="a file the agent added under a protected directory: `grade` runs it "
        "beside the hidden tests, `remove` deletes it before they run (listed in the "
        "integrity evidence as informational); never a cheat by itself",
    )


# `task.language` values: SandboxFusion's names (and aliases) that core/languages.py runs
LANGUAGE_NAMES = frozenset(
    {
        "python",
        "pytest",
        "bash",
        "cpp",
        "c",
        "java",
        "junit",
        "go",
        "go_test",
        "nodejs",
        "js",
        "javascript",
        "typescript",
        "ts",
        "rust",
        "csharp",
        "kotlin_script",
        "scala",
        "ruby",
        "php",
        "perl",
        "lua",
        "sql",
        "verilog",
        "R",
        "racket",
        "D_ut",
        "jest",
    }
)

# languages whose program is a test suite, not one that reads stdin
TEST_LANGUAGES = ("pytest", "junit", "go_test")
JUDGED_OUTPUT_BYTES = 32 << 20  # every case's stdout together, as a judged run returns them


class TaskSpec(_Request):
    image: str = Field(
        "python",
        max_length=512,
        description="a name from the image allowlist, or an image reference "
        "(host:port/repo:tag or …@sha256:…) the deployment's patterns allow",
    )
    language: str | None = Field(
        None,
        max_length=32,
        description="SandboxFusion's language name (cpp, java, go, ...): a compiled one "
        "compiles before the tests run, and code that does not is a compile_error",
    )
    statement: str | None = Field(None, max_length=200_000, description="the task as posed")
    files: dict[str, str] = Field(default_factory=dict)
    setup: list[str] = Field(
        default_factory=list, max_length=32, description="commands run before the agent acts"
    )
    tests: TestSpec
    limits: Limits = Field(default_factory=Limits)
    scoring: Scoring = Scoring.binary
    repo: RepoSnapshot | None = None
    protected_paths: list[str] = Field(
        default_factory=list, description="visible paths the agent must not change"
    )
    target_package: str | None = Field(None, max_length=200)
    pinned_version: str | None = Field(None, max_length=100)
    policy: Policy = Field(default_factory=Policy)
    isolation: Isolation | None = Field(
        None, description="at least this isolation (the deployment's when unset or weaker)"
    )

    _files = field_validator("files")(_check_files)

    @field_validator("image")
    @classmethod
    def _check_image(cls, image: str) -> str:
        return check_reference(image) if is_reference(image) else image

    @field_validator("language")
    @classmethod
    def _check_language(cls, name: str | None) -> str | None:
        if name is not None and name not in LANGUAGE_NAMES:
            known = ", ".join(sorted(LANGUAGE_NAMES))
            raise ValueError(f"language {name!r} is not supported; supported: {known}")
        return name

    @model_validator(mode="after")
    def _judged_program(self) -> TaskSpec:
        if self.tests.format is TestFormat.cases and self.language in (None, *TEST_LANGUAGES):
            raise ValueError("format `cases` runs a program: give its `language` (not a test one)")
        judge = self.tests.judge
        if judge is not None and len(judge.cases) * self.limits.output_bytes > JUDGED_OUTPUT_BYTES:
            raise ValueError(
                f"{len(judge.cases)} cases of limits.output_bytes {self.limits.output_bytes} "
                f"can print more than the {JUDGED_OUTPUT_BYTES} bytes a judged run returns: "
                "lower limits.output_bytes or send fewer cases"
            )
        return self

    @field_validator("protected_paths")
    @classmethod
    def _check_protected(cls, paths: list[str]) -> list[str]:
        return [
            check_relative_path(p.rstrip("/")) + ("/" if p.endswith("/") else "") for p in paths
        ]


class TaskContext(_Request):
    """What the rule filter knows of a task (also accepted alone by /v1/screen)."""

    kind: str | None = None
    target_package: str | None = None
    pinned_version: str | None = None
    protected_paths: list[str] = Field(default_factory=list)
    base_commit: str | None = None


# --------------------------------------------------------------------------- actions


def _type_required(schema: JsonDict) -> None:
    """`type` defaults for Python callers, but on the wire it tells the actions apart."""
    required = schema.setdefault("required", [])
    assert isinstance(required, list)
    if "type" not in required:
        required.insert(0, "type")


class _Action(_Request):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_type_required)


class BashAction(_Action):
    type: Literal["bash"] = "bash"
    command: str = Field(max_length=1_048_576)
    timeout_s: float = Field(30.0, gt=0, le=3600)


class WriteFileAction(_Action):
    type: Literal["write_file"] = "write_file"
    path: str = Field(max_length=4096)
    content: str = Field(max_length=MAX_FILE_BYTES)


class ReadFileAction(_Action):
    type: Literal["read_file"] = "read_file"
    path: str = Field(max_length=4096)


Action = Annotated[BashAction | WriteFileAction | ReadFileAction, Field(discriminator="type")]


class GiveUpAction(_Action):
    """The agent ends its interactive episode itself: `gave_up`, the policy's
    `give_up_reward`, graded no further. Never a step of a one-shot solution."""

    type: Literal["give_up"] = "give_up"
    reason: str = Field("", max_length=4096)


InteractiveAction = Annotated[
    BashAction | WriteFileAction | ReadFileAction | GiveUpAction, Field(discriminator="type")
]


class Solution(_Request):
    files: dict[str, str] = Field(default_factory=dict)
    actions: list[Action] = Field(default_factory=list, max_length=256)

    _files = field_validator("files")(_check_files)


class EpisodeMode(StrEnum):
    oneshot = "oneshot"
    interactive = "interactive"


# What `_solution_matches_mode` checks, said in the schema: a one-shot episode (the default
# mode) needs a solution, an interactive one takes none.
_SOLUTION_MATCHES_MODE: JsonDict = {
    "anyOf": [
        {
            "properties": {"mode": {"const": "oneshot"}, "solution": {"type": "object"}},
            "required": ["solution"],
        },
        {
            "properties": {"mode": {"const": "interactive"}, "solution": {"type": "null"}},
            "required": ["mode"],
        },
    ]
}


class EpisodeCreate(_Request):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_SOLUTION_MATCHES_MODE)

    task: TaskSpec
    solution: Solution | None = None
    mode: EpisodeMode = EpisodeMode.oneshot
    metadata: dict[str, str] = Field(default_factory=dict, max_length=64)
    idempotency_key: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="a retry of this request sends the same key and gets the first one's "
        "episode (one-shot, same content, within PROCTOR_DEDUP_TTL_S); without a key every "
        "request is its own run (the `Idempotency-Key` header sets it too)",
    )
    share_identical: bool = Field(
        False,
        description="content dedup: share the episode of an identical one-shot request that "
        "also asked for it, within PROCTOR_DEDUP_TTL_S (for reruns of the same data; never "
        "for samples whose runs must be their own)",
    )

    @model_validator(mode="after")
    def _solution_matches_mode(self) -> EpisodeCreate:
        if self.mode is EpisodeMode.oneshot and self.solution is None:
            raise ValueError("a one-shot episode needs a solution")
        if self.mode is EpisodeMode.interactive and self.solution is not None:
            raise ValueError("an interactive episode takes actions, not a solution")
        task = self.task
        if task.tests.format is TestFormat.assert_ and (
            self.mode is EpisodeMode.interactive
            or task.repo is not None
            or task.language not in (None, "python")
        ):
            # never silently weaker: the format's promise is grading out of the code's reach
            raise ValueError(
                "format `assert` runs the tests in a process of their own, out of the "
                "solution's reach: only one-shot Python tasks without a repository have it "
                "(give this task format `junit`)"
            )
        return self


# --------------------------------------------------------------------------- results


class EpisodeStatus(StrEnum):
    queued = "queued"
    starting = "starting"
    running = "running"
    evaluating = "evaluating"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (EpisodeStatus.completed, EpisodeStatus.failed, EpisodeStatus.cancelled)


class Verdict(StrEnum):
    passed = "passed"
    failed = "failed"
    timeout = "timeout"
    oom = "oom"
    output_limit = "output_limit"
    compile_error = "compile_error"
    runtime_error = "runtime_error"
    cheat = "cheat"
    infra_error = "infra_error"
    cancelled = "cancelled"
    gave_up = "gave_up"
    # the task cannot run as given (its repository, or its image reference the registry has
    # not); no agent or code under test ran
    task_error = "task_error"


class TestOutcome(StrEnum):
    __test__ = False  # not a pytest test class

    passed = "passed"
    failed = "failed"
    error = "error"
    skipped = "skipped"


class TestCase(_Result):
    __test__: ClassVar[bool] = False  # not a pytest test class

    name: str
    outcome: TestOutcome
    duration_s: float = 0.0
    message: str | None = None
    verdict: CaseVerdict | None = None  # a judged case's (format `cases`)


class Observation(_Result):
    output: str = Field("", description="stdout, or the file content for read_file")
    stderr: str = ""
    exit_code: int | None = None
    truncated: bool = False
    timed_out: bool = False
    duration_s: float = 0.0


class Decision(StrEnum):
    allow = "allow"
    intercept = "intercept"
    review = "review"


class CheatCategory(StrEnum):
    """What kind of cheat a rule, the judge, the honeypot or the integrity check saw."""

    # the rule filter's (anticheat/rules/)
    vcs_history = "vcs_history"
    network_fetch = "network_fetch"
    eval_artifact_read = "eval_artifact_read"
    test_tampering = "test_tampering"
    grader_tampering = "grader_tampering"
    harness_detection = "harness_detection"
    resource_abuse = "resource_abuse"
    evasion = "evasion"  # what the filter could not see: it goes to the judge
    # only a reader of the trajectory sees these (the judge's)
    hardcoded_output = "hardcoded_output"
    special_casing = "special_casing"
    hollow_implementation = "hollow_implementation"
    prompt_injection = "prompt_injection"
    other = "other"


class EvidenceSource(StrEnum):
    rule = "rule"
    judge = "judge"
    honeypot = "honeypot"
    integrity = "integrity"
    grader = "grader"  # the grading process's runtime defences (audit hook, trusted ==)


class Level(StrEnum):
    """What a piece of evidence makes of its episode (anticheat/README.md, "Levels")."""

    attempt = "attempt"  # structure answered it, nothing revealed: a step penalty, merit kept
    cheat = "cheat"  # it acted on what the grader sees, or something withheld was revealed


class Evidence(_Result):
    source: EvidenceSource
    category: CheatCategory
    detail: str
    rule: str | None = None
    step: int | None = None
    level: Level | None = Field(
        None,
        description="`attempt`: a step penalty, the reward stays merit; `cheat`: the "
        "policy's cheat reward; none: on record only (costs nothing)",
    )
    decisive: bool = Field(False, description="this item decided the verdict (`cheat`)")
    confidence: float | None = Field(None, description="the judge's, when its verdict decided it")
    judge: str | None = Field(
        None,
        description="what the judge made of it when a rule asked: its verdict, or why its "
        "answer was not used and the rule's no-judge fallback decided",
    )


class CheatReport(_Result):
    detected: bool = False
    evidence: list[Evidence] = Field(default_factory=list)
    judge: str | None = Field(None, description="judge status: verdict, unavailable, skipped")


class Step(_Result):
    step: int
    action: Action
    observation: Observation
    intercepted: bool = False
    rule: str | None = None
    category: CheatCategory | None = None
    evidence: str | None = None
    judge: str | None = Field(None, description="the LLM judge's review, when a rule asked")
    judge_confidence: float | None = Field(None, description="the judge's, when it gave a verdict")
    level: Level | None = Field(
        None, description="what the rule's hit at this step makes of the episode, if one hit"
    )
    reward: float = 0.0
    started_at: float | None = None


class Timings(_Result):
    queued_s: float | None = None
    sandbox_start_s: float | None = None
    run_s: float | None = None
    compile_s: float | None = None
    total_s: float | None = None


class SandboxInfo(_Result):
    image: str | None = None
    image_digest: str | None = None
    host: str | None = None
    network: str | None = None
    isolation: Isolation | None = None


class EpisodeResult(_Result):
    id: str
    status: EpisodeStatus
    mode: EpisodeMode = EpisodeMode.oneshot
    reward: float | None = None
    passed: bool | None = None
    verdict: Verdict | None = None
    tests: list[TestCase] = Field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    exit_code: int | None = Field(None, description="exit code of the test command")
    reason: str = Field("", description="why the verdict is what it is, in one line")
    error: str | None = Field(None, description="what went wrong in our infrastructure")
    timings: Timings = Field(default_factory=Timings)
    sandbox: SandboxInfo = Field(default_factory=SandboxInfo)
    steps: list[Step] = Field(default_factory=list)
    step_rewards: list[float] = Field(default_factory=list)
    cheat: CheatReport = Field(default_factory=CheatReport)
    files: dict[str, str] = Field(
        default_factory=dict, description="the `tests.fetch` files read back: path → base64"
    )
    metadata: dict[str, str] = Field(default_factory=dict)
    created_at: datetime | None = None
    finished_at: datetime | None = None


class StepResult(_Result):
    """The answer to one interactive action."""

    id: str
    step: int
    observation: Observation
    done: bool = False


class RepoCreated(_Result):
    """A sealed repository kept by the service (`POST /v1/repos`): name it by `ref`."""

    ref: str = Field(description="`task.repo.ref` for the episodes that use it")
    base_commit: str = Field(description="the base commit, in full")
    branch: str
    size: int = Field(description="bytes of the sealed copy")
    expires_in_s: int = Field(description="unless it is used again (each use renews it)")


class EpisodeCreated(_Result):
    """The answer to a create that did not wait for (or outlived) the episode."""

    id: str
    status: EpisodeStatus
    observation: Observation | None = None


class EpisodeResults(_Result):
    """Many episodes read at once (`POST /v1/episodes/results`): the results of those that
    ended, in the order asked; the ids of those still running and of those unknown (or
    whose result expired)."""

    results: list[EpisodeResult]
    pending: list[str]
    unknown: list[str]


class ScreenVerdict(_Result):
    """What the rule filter (and, for `review`, the judge) decided about one action."""

    decision: Decision
    rule: str | None = None
    category: CheatCategory | None = None
    reason: str = ""


class ScreenItem(BaseModel):
    # extra fields (an `id`, a label) are allowed and ignored, so datasets screen as they are
    model_config = ConfigDict(extra="allow")

    action: Action
    task: TaskContext | None = None


class ScreenRequest(_Request):
    items: list[ScreenItem] = Field(max_length=10_000)


class ScreenResponse(_Result):
    verdicts: list[ScreenVerdict]


class EpisodeExport(_Result):
    """One finished episode as a dataset row (`GET /v1/episodes/export`, the durable sink):
    what was asked, what the code did and saw, how it was graded, and why."""

    id: str
    status: EpisodeStatus
    mode: EpisodeMode
    verdict: Verdict | None = None
    reward: float | None = None
    passed: bool | None = None
    reason: str = ""
    error: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    created_at: datetime | None = None
    finished_at: datetime | None = None
    task: TaskSpec
    solution: Solution | None = None
    steps: list[Step] = Field(
        default_factory=list, description="each action, its observation, and what screened it"
    )
    tests: list[TestCase] = Field(default_factory=list)
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    cheat_detected: bool = False
    cheat_labels: list[CheatCategory] = Field(
        default_factory=list, description="the distinct categories of the evidence, in order"
    )
    evidence: list[Evidence] = Field(default_factory=list)
    judge: str | None = None
    timings: Timings = Field(default_factory=Timings)
    sandbox: SandboxInfo = Field(default_factory=SandboxInfo)


class EpisodeRegrade(_Result):
    """A finished episode graded again with today's rules, judge and tests: the result it
    had, and the new episode (linked by its `regrade_of` metadata) as it stands."""

    old: EpisodeResult
    new: EpisodeResult


class EpisodeListed(_Result):
    """One ended episode in a listing (`GET /v1/episodes`): its summary, not its output."""

    id: str
    status: EpisodeStatus
    mode: EpisodeMode
    verdict: Verdict | None = None
    reward: float | None = None
    passed: bool | None = None
    duration_s: float | None = None
    image: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    created_at: datetime | None = None
    finished_at: datetime
    steps: int = 0
    reason: str = ""
    categories: list[str] = Field(default_factory=list, description="cheat categories seen")
    rules: list[str] = Field(default_factory=list, description="the rules that hit")


class EpisodePage(_Result):
    """A page of ended episodes, newest first; `next_cursor` asks for the next one."""

    episodes: list[EpisodeListed]
    next_cursor: str | None = None
