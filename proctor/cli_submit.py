"""`proctor submit FILE.jsonl`: a file of episodes run to their ends, resumable.

Each line is an episode request (`EpisodeCreate`), optionally with an `id` of the caller's
(removed before it is sent; without one, the line's content names it). Results are
appended to the output as they come, one JSON object a line: the result with the line's
id as `input_id`. Run again with the same output, the lines whose id already has a
completed result there are skipped; those that failed in our infrastructure (`failed`) or
were cancelled run again. Episodes go out in batches (`/v1/episodes/batch`), at most
`concurrency` in flight; a full queue (429) is waited out, as its `Retry-After` says.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from proctor.client import ApiError, AsyncClient, Overloaded, Unavailable
from proctor.models import EpisodeCreate, EpisodeResult, EpisodeStatus

UNAVAILABLE_BACKOFF_S = (1.0, 30.0)  # first and longest wait while the service is away
LONGEST_WAIT_S = 300  # one server-side wait for a result


class InputError(ValueError):
    """A line of the input that is not an episode request; says which and why."""


@dataclass(frozen=True, slots=True)
class Line:
    number: int
    input_id: str
    request: EpisodeCreate


def read_lines(text: str) -> list[Line]:
    """The episodes of a JSON Lines text; `InputError` names the first bad line."""
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"line {number}: not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise InputError(f"line {number}: not a JSON object")
        given = data.pop("id", None)
        try:
            request = EpisodeCreate.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InputError(f"line {number}: {where}: {first['msg']}") from None
        lines.append(Line(number, str(given) if given is not None else _content_id(data), request))
    return lines


def _content_id(data: dict[str, Any]) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:32]


def finished_ids(output: Path) -> set[str]:
    """The input ids with a completed result in `output` (what a resumed run skips)."""
    if not output.exists():
        return set()
    done = set()
    with output.open() as rows:
        for raw in rows:
            try:
                row = json.loads(raw)
            except json.JSONDecodeError:
                continue  # a line torn by an interrupted run
            if row.get("status") == EpisodeStatus.completed.value and "input_id" in row:
                done.add(str(row["input_id"]))
    return done


@dataclass(slots=True)
class Tally:
    """What a run has seen so far: by verdict, with rewards, for the progress and summary."""

    verdicts: Counter[str] = field(default_factory=Counter)
    rewards: dict[str, list[float]] = field(default_factory=dict)
    rejected: int = 0
    started: float = field(default_factory=time.monotonic)

    def add(self, result: EpisodeResult) -> None:
        verdict = result.verdict.value if result.verdict else result.status.value
        self.verdicts[verdict] += 1
        if result.reward is not None:
            self.rewards.setdefault(verdict, []).append(result.reward)

    @property
    def done(self) -> int:
        return sum(self.verdicts.values()) + self.rejected

    def line(self) -> str:
        return " · ".join(f"{v} {n}" for v, n in self.verdicts.most_common())


Report = Callable[[Line, EpisodeResult | None, str | None], None]


async def _retrying(what: Callable[[], Awaitable[Any]]) -> Any:
    """`what()`, waiting out a full queue and a service that is away."""
    wait, longest = UNAVAILABLE_BACKOFF_S
    while True:
        try:
            return await what()
        except Overloaded as exc:
            await asyncio.sleep(max(exc.retry_after, 0.1))
        except Unavailable:
            await asyncio.sleep(wait)
            wait = min(wait * 2, longest)


async def run_lines(
    client: AsyncClient,
    lines: Sequence[Line],
    report: Report,
    *,
    concurrency: int,
    batch: int,
    timeout_s: float,
) -> None:
    """Submit the lines in batches, at most `concurrency` in flight, and report each end."""
    slots = asyncio.Semaphore(concurrency)
    waits: set[asyncio.Task[None]] = set()

    async def wait_for(line: Line, episode_id: str) -> None:
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                left = max(min(deadline - time.monotonic(), LONGEST_WAIT_S), 1)
                result: EpisodeResult = await _retrying(
                    lambda: client.get(episode_id, wait_s=left)  # noqa: B023
                )
                if result.status.terminal or time.monotonic() >= deadline:
                    report(line, result, None)
                    return
        finally:
            slots.release()

    async def submit(group: list[Line]) -> list[str | ApiError]:
        try:
            ids = await _retrying(lambda: client.create_many([x.request for x in group]))
            return list(ids)
        except ApiError as exc:  # the batch is refused whole: find the line(s) at fault
            if len(group) == 1:
                return [exc]
            out: list[str | ApiError] = []
            for one in group:
                out += await submit([one])
            return out

    for start in range(0, len(lines), batch):
        group = list(lines[start : start + batch])
        for _ in group:
            await slots.acquire()
        for line, outcome in zip(group, await submit(group), strict=True):
            if isinstance(outcome, ApiError):
                slots.release()
                report(line, None, str(outcome))
                continue
            task = asyncio.create_task(wait_for(line, outcome))
            waits.add(task)
            task.add_done_callback(waits.discard)
    if waits:
        await asyncio.gather(*list(waits))


def result_row(line: Line, result: EpisodeResult | None, error: str | None) -> str:
    """The output line of one input line: its result with `input_id`, or why it was refused."""
    if result is None:
        row: dict[str, Any] = {"input_id": line.input_id, "line": line.number, "error": error}
    else:
        row = {"input_id": line.input_id, **result.model_dump(mode="json")}
    return json.dumps(row, ensure_ascii=False) + "\n"


def writer(out: IO[str], tally: Tally, on_end: Callable[[], None]) -> Report:
    def report(line: Line, result: EpisodeResult | None, error: str | None) -> None:
        out.write(result_row(line, result, error))
        out.flush()
        if result is None:
            tally.rejected += 1
        else:
            tally.add(result)
        on_end()

    return report
