"""Trainers' code-task formats → Proctor episodes, shared by the verl, OpenRLHF and TRL adapters.

A ground truth (a dict, or the JSON text of one) is one of:

    {"inputs": [...], "outputs": [...]}                  stdin/stdout cases (verl, PRIME, APPS)
    {"inputs": [...], "outputs": [...], "fn_name": "f"}  call-based cases: an input is one JSON
                                                         value per line, an argument each
    {"assert_case": [...]} (+ "inputs"/"outputs")        the solution followed by each snippet
    {"input_output": "<JSON of one of the above>"}       APPS/TACO rows as published
    {"test": "...", "entry_point": "f"}                  HumanEval: `check(f)` must not raise
                                                         (a plain pytest test, graded split)
    {"tests": {...}, ...} or {"task": {...}, "solution_path": "..."}   a Proctor task as is

A sample becomes one one-shot episode. For case lists the hidden tests are a generated
pytest file with one test per case, so the result's `tests` shows each case's outcome; the
solution runs in a child process per case, and outputs are compared as verl and
SandboxFusion do (trailing whitespace per line and trailing blank lines ignored, numbers
within a relative 1e-5). Errors in the data are `GroundTruthError`, never a score of 0.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from proctor.client import ApiError, AsyncClient, Client, Overloaded, ProctorError, Unavailable
from proctor.models import (
    EpisodeCreate,
    EpisodeResult,
    EpisodeResults,
    Limits,
    Scoring,
    Solution,
    TaskSpec,
    TestOutcome,
    TestSpec,
    Verdict,
)

__all__ = [
    "SOLUTION_PATH",
    "CodeTaskOptions",
    "GroundTruthError",
    "Outcome",
    "case_counts",
    "episode_for",
    "extract_code",
    "load_catalog",
    "resolve_label",
    "run_episodes",
    "run_episodes_async",
    "timed_out",
]

SOLUTION_PATH = "solution.py"
TEST_FILE = "test_proctor_cases.py"
CASES_FILE = "proctor_cases.json"
CALL_DRIVER_FILE = "proctor_call.py"
# pytest's own start-up and collection, beyond the per-case time limits
HARNESS_OVERHEAD_S = 15.0
# how assets/cases_harness.py words a case that ran out of its time limit
CASE_TIME_LIMIT = "time limit exceeded"

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)```", re.DOTALL)
_CODE_LANGUAGES = {"", "python", "python3", "py"}


class GroundTruthError(ValueError):
    """The ground truth is not a task we can build: a problem of the data, not of the answer."""


@dataclass(frozen=True, slots=True)
class CodeTaskOptions:
    """How case lists become an episode (a Proctor task brings its own limits)."""

    case_timeout_s: float = 10.0
    memory_mb: int = 1024
    scoring: Scoring = Scoring.binary
    image: str = "python"
    max_cases: int | None = None
    # the whole test run; by default every case's limit plus pytest's start-up
    episode_timeout_s: float | None = None
    # stop at the first failing case; by default only when a single failure decides (binary)
    fail_fast: bool | None = None


def extract_code(text: str) -> str:
    """The program in a completion: its last Python code block, else its first block, else all.

    verl's sandbox reward takes the last ```python block and PRIME's the same; a completion
    that is bare code is taken whole.
    """
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    python = [body for lang, body in blocks if lang in _CODE_LANGUAGES]
    if python:
        return str(python[-1])
    if blocks:
        return str(blocks[0][1])
    return text


def episode_for(
    ground_truth: Any,
    code: str,
    options: CodeTaskOptions | None = None,
    *,
    metadata: Mapping[str, str] | None = None,
) -> EpisodeCreate:
    """One one-shot episode that grades `code` against `ground_truth` (any format above)."""
    options = options or CodeTaskOptions()
    spec = _as_mapping(ground_truth)
    try:
        if "tests" in spec or "task" in spec:
            return _proctor_task(spec, code, metadata)
        if "test" in spec and "entry_point" in spec:
            return _check_task(spec, code, options, metadata)
        return _case_task(spec, code, options, metadata)
    except ValidationError as exc:
        raise GroundTruthError(f"the task is not valid: {_first_error(exc)}") from exc


def _as_mapping(ground_truth: Any) -> Mapping[str, Any]:
    value = ground_truth
    if isinstance(value, bytes | bytearray):
        value = value.decode()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise GroundTruthError(f"the ground truth is not JSON: {exc}") from exc
    if isinstance(value, Mapping) and isinstance(value.get("input_output"), str | bytes):
        return _as_mapping(value["input_output"])
    if not isinstance(value, Mapping):
        raise GroundTruthError(f"the ground truth is a {type(value).__name__}, not an object")
    return value


def _proctor_task(
    spec: Mapping[str, Any], code: str, metadata: Mapping[str, str] | None
) -> EpisodeCreate:
    task_data = spec.get("task", spec)
    path = str(spec.get("solution_path", SOLUTION_PATH)) if "task" in spec else SOLUTION_PATH
    return EpisodeCreate(
        task=TaskSpec.model_validate(task_data),
        solution=Solution(files={path: code}),
        metadata=dict(metadata or {}),
    )


# HumanEval's `check(candidate)` as a plain pytest test: the workers grade it split, in a
# process of its own that the solution cannot read or reach (docs/isolation.md)
CHECK_FILE = "test_check.py"
CHECK_TEMPLATE = """\
import solution as _solution

globals().update({{k: v for k, v in vars(_solution).items() if not k.startswith("__")}})

{test}


def test_check():
    check({entry_point})
"""


def _check_task(
    spec: Mapping[str, Any],
    code: str,
    options: CodeTaskOptions,
    metadata: Mapping[str, str] | None,
) -> EpisodeCreate:
    entry_point = str(spec["entry_point"])
    if not entry_point.isidentifier():
        raise GroundTruthError(f"the entry point {entry_point!r} is not a Python name")
    tests = CHECK_TEMPLATE.format(test=spec["test"], entry_point=entry_point)
    timeout = options.episode_timeout_s or options.case_timeout_s + HARNESS_OVERHEAD_S
    return EpisodeCreate(
        task=TaskSpec(
            image=options.image,
            tests=TestSpec(files={CHECK_FILE: tests}),
            limits=Limits(timeout_s=min(timeout, 3600), memory_mb=options.memory_mb),
            scoring=options.scoring,
        ),
        solution=Solution(files={SOLUTION_PATH: code}),
        metadata=dict(metadata or {}),
    )


def _case_task(
    spec: Mapping[str, Any],
    code: str,
    options: CodeTaskOptions,
    metadata: Mapping[str, str] | None,
) -> EpisodeCreate:
    mode, cases, fn_name = _cases(spec)
    if options.max_cases is not None:
        cases = cases[: options.max_cases]
    if not cases:
        raise GroundTruthError("the ground truth has no test cases")
    fail_fast = options.fail_fast
    if fail_fast is None:
        fail_fast = options.scoring is Scoring.binary
    data = {
        "mode": mode,
        "solution": SOLUTION_PATH,
        "fn_name": fn_name,
        "timeout_s": options.case_timeout_s,
        "fail_fast": fail_fast,
        "cases": cases,
    }
    files = {TEST_FILE: sandbox_source("cases_harness.py"), CASES_FILE: json.dumps(data)}
    if mode == "call":
        files[CALL_DRIVER_FILE] = sandbox_source("call_driver.py")
    timeout = options.episode_timeout_s
    if timeout is None:
        timeout = len(cases) * options.case_timeout_s + HARNESS_OVERHEAD_S
    return EpisodeCreate(
        task=TaskSpec(
            image=options.image,
            tests=TestSpec(files=files),
            limits=Limits(timeout_s=min(timeout, 3600), memory_mb=options.memory_mb),
            scoring=options.scoring,
        ),
        solution=Solution(files={SOLUTION_PATH: code}),
        metadata=dict(metadata or {}),
    )


def _cases(spec: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]], str | None]:
    """The harness mode and its cases: `stdio`, `call` (with the function name) or `program`."""
    asserts = spec.get("assert_case")
    if asserts is not None:
        if not isinstance(asserts, list):
            raise GroundTruthError("`assert_case` must be a list of code snippets")
        inputs = spec.get("inputs") or [None] * len(asserts)
        outputs = spec.get("outputs") or [None] * len(asserts)
        if not len(asserts) == len(inputs) == len(outputs):
            raise GroundTruthError("`assert_case`, `inputs` and `outputs` differ in length")
        cases = [
            {"suffix": str(snippet or ""), "stdin": _text_or_none(i), "expected": _text_or_none(o)}
            for snippet, i, o in zip(asserts, inputs, outputs, strict=True)
        ]
        return "program", cases, None
    if "inputs" not in spec or "outputs" not in spec:
        raise GroundTruthError(
            "unknown ground truth: expected `inputs`/`outputs` (with `fn_name` for call-based "
            "cases), `assert_case`, HumanEval's `test`/`entry_point`, or a Proctor task"
        )
    inputs, outputs = spec["inputs"], spec["outputs"]
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise GroundTruthError("`inputs` and `outputs` must be lists")
    if len(inputs) != len(outputs):
        raise GroundTruthError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    fn_name = spec.get("fn_name")
    if fn_name:
        calls = [
            {"args": _call_args(i), "expected": _json_value(o)}
            for i, o in zip(inputs, outputs, strict=True)
        ]
        return "call", calls, str(fn_name)
    return (
        "stdio",
        [
            {"stdin": _text_or_none(i), "expected": _text_or_none(o)}
            for i, o in zip(inputs, outputs, strict=True)
        ],
        None,
    )


@cache
def sandbox_source(name: str) -> str:
    """A file of `assets/` that runs inside the sandbox, as text (never imported here)."""
    asset = resources.files("proctor.integrations").joinpath("assets", name)
    return asset.read_text(encoding="utf-8")


def _text_or_none(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):  # APPS sometimes lists an output's lines
        return "\n".join(str(line) for line in value)
    return str(value)


def _call_args(value: Any) -> list[Any]:
    """verl/PRIME give the arguments as text, one JSON value per line; APPS as a list."""
    if isinstance(value, list):
        return value
    text = str(value)
    if not text.strip():
        return []
    try:
        return [json.loads(line) for line in text.split("\n")]
    except json.JSONDecodeError as exc:
        raise GroundTruthError(f"a call-based input is not JSON lines: {exc}") from exc


def _json_value(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value  # a bare string answer
    return value


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    return f"{'.'.join(str(p) for p in error.get('loc', ()))}: {error.get('msg', '')}"


# ---------------------------------------------------------------------------- task ids


def load_catalog(path: str | Path) -> dict[str, Any]:
    """Tasks by id from a JSON Lines file: each line an object with an `id` and a ground truth.

    The ground truth is the line's `ground_truth` or `task` field when it has one, else the
    line itself without its `id`.
    """
    catalog: dict[str, Any] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if not isinstance(row, dict) or "id" not in row:
                raise GroundTruthError(f"{path}:{number}: a catalog line needs an `id`")
            task_id = str(row.pop("id"))
            catalog[task_id] = row.get("ground_truth", row)
    return catalog


def resolve_label(label: Any, catalog: Mapping[str, Any] | None = None) -> Any:
    """A label as a ground truth: the JSON text of one, or the id of one in the catalog."""
    if not isinstance(label, str):
        return label
    if catalog is not None and label in catalog:
        return catalog[label]
    stripped = label.strip()
    if stripped.startswith(("{", "[")):
        return stripped
    if catalog is None:
        raise GroundTruthError(f"label {label[:80]!r} is not JSON and no task catalog is loaded")
    raise GroundTruthError(f"no task {label[:80]!r} in the task catalog")


# ---------------------------------------------------------------------------- results


Outcome = EpisodeResult | ProctorError


def case_counts(result: EpisodeResult) -> tuple[int, int]:
    """(passed, total) over the cases that ran."""
    counted = [t for t in result.tests if t.outcome is not TestOutcome.skipped]
    return sum(t.outcome is TestOutcome.passed for t in counted), len(counted)


def timed_out(result: EpisodeResult) -> bool:
    """The episode ran out of time, or a case of the harness ran out of its own limit (the
    episode then ends `failed`: the other cases still count)."""
    return result.verdict is Verdict.timeout or any(
        t.outcome is not TestOutcome.passed and CASE_TIME_LIMIT in (t.message or "")
        for t in result.tests
    )


# ---------------------------------------------------------------------------- running many

T = TypeVar("T")

MAX_BATCH = 500  # episodes per create request, under the service's default bound of 1000
MAX_WAIT_S = 300.0  # the longest server-side wait the API grants one request
RESEND_AFTER_S = 1.0  # a submission whose connection failed is sent once more, after this


def _chunks(items: Sequence[T]) -> list[Sequence[T]]:
    return [items[i : i + MAX_BATCH] for i in range(0, len(items), MAX_BATCH)]


def _keyed(episodes: Sequence[EpisodeCreate]) -> list[EpisodeCreate]:
    """Each sample with an idempotency key of its own, unless it has one: a resubmission of
    this call (a connection lost after the service took it) gets its episodes back, while
    equal samples stay runs of their own."""
    return [
        e if e.idempotency_key else e.model_copy(update={"idempotency_key": uuid.uuid4().hex})
        for e in episodes
    ]


def _late(episode_id: str, timeout_s: float) -> Unavailable:
    return Unavailable(f"episode {episode_id} did not finish within {timeout_s:g} s")


def run_episodes(
    client: Client, episodes: Sequence[EpisodeCreate], *, timeout_s: float
) -> list[Outcome]:
    """Submit in batches, then wait for the results a batch at a time (one request holds
    until a whole batch ended); a failure is an error in its slot."""
    deadline = time.monotonic() + timeout_s
    submitted: list[str | ProctorError] = []
    for chunk in _chunks(_keyed(episodes)):
        submitted += _submit(client, chunk, deadline)
    found: dict[str, Outcome] = {}
    while pending := _pending(submitted, found):
        remaining = deadline - time.monotonic()
        for ids in _chunks(pending):
            try:
                answer = client.get_many(ids, wait_s=_wait_s(deadline - time.monotonic()))
            except ProctorError as exc:
                found.update(dict.fromkeys(ids, exc))
                continue
            _settle(answer, found)
        if remaining <= 0:
            found.update({i: _late(i, timeout_s) for i in _pending(submitted, found)})
    return [found[item] if isinstance(item, str) else item for item in submitted]


def _pending(submitted: Sequence[str | ProctorError], found: Mapping[str, Outcome]) -> list[str]:
    return list(dict.fromkeys(i for i in submitted if isinstance(i, str) and i not in found))


def _wait_s(remaining: float) -> float:
    return min(max(remaining, 0.1), MAX_WAIT_S)


def _settle(answer: EpisodeResults, found: dict[str, Outcome]) -> None:
    for result in answer.results:
        found[result.id] = result
    for episode_id in answer.unknown:
        detail = f"no episode {episode_id!r} (unknown, or its result expired)"
        found[episode_id] = ApiError(404, {"detail": detail})


def _submit(
    client: Client, chunk: Sequence[EpisodeCreate], deadline: float
) -> list[str | ProctorError]:
    resent = False
    while True:
        try:
            return list(client.create_many(chunk))
        except Unavailable as exc:
            # once: the service may have taken the call before the connection went (the
            # keys make the resend the same call)
            if resent or time.monotonic() + RESEND_AFTER_S > deadline:
                return [exc] * len(chunk)
            resent = True
            time.sleep(RESEND_AFTER_S)
        except Overloaded as exc:
            if time.monotonic() + exc.retry_after > deadline:
                return [exc] * len(chunk)
            time.sleep(exc.retry_after)
        except ApiError as exc:
            # one task this deployment refuses (an unknown image) refuses the whole batch:
            # submit one by one, so only that sample fails
            if len(chunk) == 1:
                return [exc]
            return [item for episode in chunk for item in _submit(client, [episode], deadline)]
        except ProctorError as exc:
            return [exc] * len(chunk)


async def run_episodes_async(
    client: AsyncClient, episodes: Sequence[EpisodeCreate], *, timeout_s: float
) -> list[Outcome]:
    """`run_episodes` for an event loop: the batches' waits run concurrently."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    submitted: list[str | ProctorError] = []
    for chunk in _chunks(_keyed(episodes)):
        submitted += await _submit_async(client, chunk, deadline)
    found: dict[str, Outcome] = {}

    async def wait(chunk: Sequence[str]) -> None:
        try:
            answer = await client.get_many(chunk, wait_s=_wait_s(deadline - loop.time()))
        except ProctorError as exc:
            found.update(dict.fromkeys(chunk, exc))
            return
        _settle(answer, found)

    while pending := _pending(submitted, found):
        remaining = deadline - loop.time()
        await asyncio.gather(*(wait(chunk) for chunk in _chunks(pending)))
        if remaining <= 0:
            found.update({i: _late(i, timeout_s) for i in _pending(submitted, found)})
    return [found[item] if isinstance(item, str) else item for item in submitted]


async def _submit_async(
    client: AsyncClient, chunk: Sequence[EpisodeCreate], deadline: float
) -> list[str | ProctorError]:
    loop = asyncio.get_running_loop()
    resent = False
    while True:
        try:
            return list(await client.create_many(chunk))
        except Unavailable as exc:
            if resent or loop.time() + RESEND_AFTER_S > deadline:
                return [exc] * len(chunk)
            resent = True
            await asyncio.sleep(RESEND_AFTER_S)
        except Overloaded as exc:
            if loop.time() + exc.retry_after > deadline:
                return [exc] * len(chunk)
            await asyncio.sleep(exc.retry_after)
        except ApiError as exc:
            if len(chunk) == 1:
                return [exc]
            return [i for e in chunk for i in await _submit_async(client, [e], deadline)]
        except ProctorError as exc:
            return [exc] * len(chunk)
