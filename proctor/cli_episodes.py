"""The operator's commands: submit a file of episodes, list, show, watch, export, regrade.

Registered on the `proctor` app by proctor/cli.py. They talk to a service through the SDK
(proctor/client.py), except `export --from-sink`, which reads the durable sink's files.
Text that came from a sandbox is printed as text (never as rich markup, control
characters removed): agent output is untrusted, in a terminal as on a page.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Annotated, Any

import typer

from proctor.client import DEFAULT_URL, ApiError, ProctorError

UrlOption = Annotated[str, typer.Option(envvar="PROCTOR_URL", help="service URL")]
TokenOption = Annotated[str | None, typer.Option(envvar="PROCTOR_TOKEN", help="bearer token")]
VerdictOption = Annotated[
    list[str] | None, typer.Option("--verdict", help="keep this verdict (repeatable)")
]
SinceOption = Annotated[
    str | None, typer.Option(help="ended at or after: unix s, ISO 8601 or an age (2h, 7d)")
]
UntilOption = Annotated[str | None, typer.Option(help="ended at or before: likewise")]
BATCH_SUFFIXES = (".jsonl", ".ndjson")
EXPORT_PAGE = 500
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b]")


def plain(value: object, limit: int | None = None) -> Any:
    """Untrusted text as a rich Text: no markup, no terminal control sequences."""
    from rich.text import Text

    text = _CONTROL.sub("", "" if value is None else str(value))
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return Text(text)


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


# ---------------------------------------------------------------------------- submit


def submit(
    path: Annotated[
        Path, typer.Argument(help="episodes, one JSON request a line (.jsonl); or one JSON; -")
    ],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="results, JSON Lines (default: FILE.results.jsonl)"),
    ] = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    timeout: Annotated[float, typer.Option(help="seconds to wait for each result")] = 600,
    concurrency: Annotated[int, typer.Option(min=1, help="episodes in flight")] = 64,
    batch: Annotated[int, typer.Option(min=1, help="episodes per batch request")] = 100,
) -> None:
    """Run a .jsonl file of episodes with progress, resumable; or one JSON request.

    Results are appended to the output; ids with a completed result there are skipped."""
    if str(path) == "-" or (path.suffix not in BATCH_SUFFIXES and output is None):
        _submit_one(path, url=url, token=token, timeout=timeout)
        return
    from proctor.cli_submit import InputError, finished_ids, read_lines

    try:
        lines = read_lines(path.read_text())
    except (InputError, OSError) as exc:
        raise _fail(f"submit: {exc}", 2) from None
    output = output or path.with_suffix(".results.jsonl")
    done = finished_ids(output)
    todo = [line for line in lines if line.input_id not in done]
    skipped = len(lines) - len(todo)
    tally = asyncio.run(
        _submit_many(todo, output, url, token, timeout, concurrency, min(batch, concurrency))
    )
    _summary(tally, skipped=skipped, output=output)
    if tally.rejected:
        raise typer.Exit(1)


def _submit_one(path: Path, *, url: str, token: str | None, timeout: float) -> None:
    from proctor.client import Client
    from proctor.models import EpisodeCreate

    text = sys.stdin.read() if str(path) == "-" else path.read_text()
    episode = EpisodeCreate.model_validate_json(text)
    with Client(url, token=token) as client:
        result = client.run(episode, timeout_s=timeout)
    typer.echo(result.model_dump_json(indent=2))


async def _submit_many(
    todo: list[Any],
    output: Path,
    url: str,
    token: str | None,
    timeout: float,
    concurrency: int,
    batch: int,
) -> Any:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    from proctor.cli_submit import Tally, run_lines, writer
    from proctor.client import AsyncClient

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:.1f}/s" if speed else "-/s")

    tally = Tally()
    console = Console(stderr=True)
    columns = (
        TextColumn("[bold]episodes"),
        BarColumn(),
        MofNCompleteColumn(),
        Rate(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[verdicts]}", markup=False),
    )
    with (
        Progress(*columns, console=console) as progress,
        output.open("a") as out,
    ):
        task = progress.add_task("run", total=len(todo), verdicts="")

        def advance() -> None:
            progress.update(task, advance=1, verdicts=tally.line())

        async with AsyncClient(url, token=token, max_connections=concurrency + 4) as client:
            await run_lines(
                client,
                todo,
                writer(out, tally, advance),
                concurrency=concurrency,
                batch=batch,
                timeout_s=timeout,
            )
    return tally


def _summary(tally: Any, *, skipped: int, output: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    elapsed = time.monotonic() - tally.started
    table = Table(title="episodes by verdict")
    for name, justify in (("verdict", "left"), ("episodes", "right"), ("share", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    table.add_column("mean reward", justify="right")
    total = max(tally.done, 1)
    for verdict, n in tally.verdicts.most_common():
        rewards = tally.rewards.get(verdict, [])
        mean = f"{sum(rewards) / len(rewards):.3f}" if rewards else "-"
        table.add_row(verdict, str(n), f"{n / total:.1%}", mean)
    if tally.rejected:
        table.add_row("refused (see output)", str(tally.rejected), f"{tally.rejected / total:.1%}")
    console = Console(stderr=True)
    console.print(table)
    rate = tally.done / elapsed if elapsed > 0 else 0.0
    console.print(
        f"{tally.done} ran in {elapsed:.1f} s ({rate:.1f}/s), {skipped} skipped "
        f"(already completed); results in {output}",
        markup=False,
        highlight=False,
    )


# ---------------------------------------------------------------------------- episodes


def episodes(
    verdict: Annotated[str | None, typer.Option(help="one verdict")] = None,
    mode: Annotated[str | None, typer.Option(help="oneshot or interactive")] = None,
    trainer: Annotated[str | None, typer.Option(help="the metadata pair trainer=…")] = None,
    meta: Annotated[list[str] | None, typer.Option(help="a metadata pair key=value")] = None,
    since: SinceOption = None,
    until: UntilOption = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 20,
    cursor: Annotated[str | None, typer.Option(help="the next page's cursor")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object a line")] = False,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
) -> None:
    """List ended episodes, newest first (the filters of `GET /v1/episodes`)."""
    from rich.console import Console
    from rich.table import Table

    from proctor.client import Client

    try:
        with Client(url, token=token) as client:
            page = client.list_episodes(
                verdict=verdict,
                mode=mode,
                trainer=trainer,
                meta=meta or [],
                since=since,
                until=until,
                limit=limit,
                cursor=cursor,
            )
    except ProctorError as exc:
        raise _fail(f"episodes: {exc}", 2 if isinstance(exc, ApiError) else 1) from None
    if as_json:
        for item in page.episodes:
            typer.echo(item.model_dump_json())
        return
    table = Table()
    for name in ("id", "ended", "verdict", "reward", "s", "mode", "image", "reason"):
        table.add_column(name, justify="right" if name in ("reward", "s") else "left")
    for e in page.episodes:
        table.add_row(
            plain(e.id),
            plain(e.finished_at.strftime("%Y-%m-%d %H:%M:%S")),
            plain(e.verdict.value if e.verdict else e.status.value),
            plain("-" if e.reward is None else f"{e.reward:g}"),
            plain("-" if e.duration_s is None else f"{e.duration_s:.2f}"),
            plain(e.mode.value),
            plain(e.image or ""),
            plain(e.reason, 60),
        )
    console = Console()
    console.print(table)
    if page.next_cursor:
        console.print(plain(f"more: --cursor '{page.next_cursor}'"))


# ---------------------------------------------------------------------------- show


def show(
    episode_id: Annotated[str, typer.Argument(help="the episode's id")],
    as_json: Annotated[bool, typer.Option("--json", help="the result as JSON")] = False,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
) -> None:
    """Print one episode readably: grade, steps, tests, cheat evidence, output."""
    from rich.console import Console

    from proctor.client import Client

    try:
        with Client(url, token=token) as client:
            result = client.get(episode_id)
    except ProctorError as exc:
        raise _fail(f"show: {exc}", 2 if isinstance(exc, ApiError) else 1) from None
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    Console().print(*render_result(result))


def render_result(result: Any) -> list[Any]:
    """The renderables of one episode's page in a terminal."""
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    verdict = result.verdict.value if result.verdict else result.status.value
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    rows = [
        ("verdict", verdict),
        ("reward", "-" if result.reward is None else f"{result.reward:g}"),
        ("status", result.status.value),
        ("mode", result.mode.value),
        ("reason", result.reason),
        ("error", result.error or ""),
        ("image", result.sandbox.image or ""),
        ("seconds", "" if result.timings.total_s is None else f"{result.timings.total_s:.2f}"),
        ("metadata", " ".join(f"{k}={v}" for k, v in sorted(result.metadata.items()))),
        ("judge", result.cheat.judge or ""),
    ]
    for name, value in rows:
        if value:
            head.add_row(name, plain(value))
    out: list[Any] = [Panel(head, title=plain(result.id), title_align="left")]
    if result.steps:
        steps = Table(title="steps")
        for name in ("#", "action", "exit", "screened", "output"):
            steps.add_column(name)
        for s in result.steps:
            action = s.action
            path = getattr(action, "path", "")
            what = getattr(action, "command", None) or f"{action.type} {path}"
            screened = f"intercepted: {s.rule} ({s.category})" if s.intercepted else (s.rule or "")
            steps.add_row(
                str(s.step),
                plain(what, 80),
                plain("" if s.observation.exit_code is None else s.observation.exit_code),
                plain(screened, 50),
                plain((s.observation.output or s.observation.stderr).strip(), 80),
            )
        out.append(steps)
    if result.tests:
        tests = Table(title="tests")
        for name in ("test", "outcome", "message"):
            tests.add_column(name)
        for t in result.tests:
            tests.add_row(plain(t.name), plain(t.outcome.value), plain(t.message or "", 80))
        out.append(tests)
    if result.cheat.evidence:
        evidence = Table(title="cheat evidence" + (" (detected)" if result.cheat.detected else ""))
        for name in ("source", "category", "rule", "step", "level", "detail"):
            evidence.add_column(name)
        for e in result.cheat.evidence:
            level = e.level.value if e.level else "on record"
            evidence.add_row(
                plain(e.source.value),
                plain(e.category.value),
                plain(e.rule or ""),
                plain("" if e.step is None else e.step),
                plain(f"{level}, decided the verdict" if e.decisive else level),
                plain(e.detail, 100),
            )
        out.append(evidence)
    for name in ("stdout", "stderr"):
        text = getattr(result, name)
        if text.strip():
            tail = "\n".join(text.strip().splitlines()[-20:])
            out.append(Panel(plain(tail), title=Text(name), title_align="left"))
    return out


# ---------------------------------------------------------------------------- top

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Prometheus' text format: (name, labels) → value."""
    samples = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match or line.startswith("#"):
            continue
        name, labels, value = match.groups()
        pairs = tuple(_LABEL.findall(labels or ""))
        try:
            samples[(name, pairs)] = float(value)
        except ValueError:
            continue
    return samples


def top(
    interval: Annotated[float, typer.Option(min=0.2, help="seconds between refreshes")] = 2.0,
    iterations: Annotated[int, typer.Option(min=0, help="refreshes, then exit (0: forever)")] = 0,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
) -> None:
    """Live counts: episodes by verdict with their rates, queue depth, workers (/metrics)."""
    from rich.console import Console
    from rich.live import Live

    from proctor.client import Client

    console = Console()
    with Client(url, token=token, timeout_s=10) as client:
        try:
            before = parse_metrics(client.metrics())
        except ProctorError as exc:
            raise _fail(f"top: {exc}") from None
        at = time.monotonic()
        n = 0
        with Live(top_table(before, before, 0.0), console=console, auto_refresh=False) as live:
            while iterations == 0 or n < iterations:
                time.sleep(interval)
                try:
                    now = parse_metrics(client.metrics())
                except ProctorError as exc:
                    console.print(plain(f"top: {exc}"))
                    continue
                elapsed, at = time.monotonic() - at, time.monotonic()
                live.update(top_table(now, before, elapsed), refresh=True)
                before = now
                n += 1


def top_table(now: dict[Any, float], before: dict[Any, float], elapsed: float) -> Any:
    from rich.table import Table

    def gauge(name: str) -> float:
        return now.get((name, ()), 0.0)

    table = Table(
        title=f"queue {gauge('proctor_queue_depth'):.0f} · active "
        f"{gauge('proctor_episodes_active'):.0f} · workers {gauge('proctor_workers_live'):.0f}"
    )
    table.add_column("verdict")
    table.add_column("episodes", justify="right")
    table.add_column("per s", justify="right")
    verdicts = sorted(
        (dict(labels)["verdict"], value)
        for (name, labels), value in now.items()
        if name == "proctor_episodes_total" and dict(labels).get("verdict")
    )
    for verdict, value in verdicts:
        old = before.get(("proctor_episodes_total", (("verdict", verdict),)), value)
        rate = (value - old) / elapsed if elapsed > 0 else 0.0
        table.add_row(plain(verdict), f"{value:.0f}", f"{rate:.2f}")
    count = now.get(("proctor_episode_total_seconds_count", ()), 0.0)
    total = now.get(("proctor_episode_total_seconds_sum", ()), 0.0)
    if count:
        table.caption = f"mean episode {total / count:.2f} s over {count:.0f}"
    return table


# ---------------------------------------------------------------------------- export


def export(
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write here (default: stdout)")
    ] = None,
    from_sink: Annotated[
        Path | None,
        typer.Option(help="read the durable sink's files in DIR instead of a service"),
    ] = None,
    verdict: VerdictOption = None,
    since: SinceOption = None,
    until: UntilOption = None,
    format: Annotated[str, typer.Option(help="jsonl, or parquet (needs pyarrow)")] = "jsonl",
    limit: Annotated[int | None, typer.Option(min=1, help="at most this many")] = None,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
) -> None:
    """Finished episodes as a dataset (task, actions, observations, grade, cheat labels)."""
    if format not in ("jsonl", "parquet"):
        raise _fail(f"export: format {format!r} is not jsonl or parquet", 2)
    if from_sink is not None:
        chunks = _sink_chunks(from_sink, verdict or [], since, until, format, limit)
    else:
        chunks = _service_chunks(url, token, verdict or [], since, until, format, limit)
    out = output.open("wb") if output else sys.stdout.buffer
    size = 0
    try:
        for chunk in chunks:
            out.write(chunk)
            size += len(chunk)
    except ProctorError as exc:
        raise _fail(f"export: {exc}", 2 if isinstance(exc, ApiError) else 1) from None
    finally:
        if output:
            out.close()
        else:
            out.flush()
    if output:
        typer.echo(f"export: {size} bytes in {output}", err=True)


def _service_chunks(
    url: str,
    token: str | None,
    verdicts: list[str],
    since: str | None,
    until: str | None,
    format: str,
    limit: int | None,
) -> Iterator[bytes]:
    from proctor.client import Client

    with Client(url, token=token) as client:
        yield from client.export(
            verdicts=verdicts, since=since, until=until, format=format, limit=limit
        )


def _sink_chunks(
    directory: Path,
    verdicts: list[str],
    since: str | None,
    until: str | None,
    format: str,
    limit: int | None,
) -> Iterator[bytes]:
    from proctor.dataset import (
        FilterError,
        RowFilter,
        jsonl_chunks,
        parquet_chunks,
        parquet_ready,
        parse_time,
        read_rows,
        sink_files,
    )

    if not directory.is_dir():
        raise _fail(f"export: {directory} is not a directory", 2)
    if format == "parquet" and not parquet_ready():
        raise _fail("export: parquet needs pyarrow (pip install 'proctor[parquet]')", 2)
    try:
        names = {v.strip() for item in verdicts for v in item.split(",") if v.strip()}
        row_filter = RowFilter(
            verdicts=frozenset(names),
            since=parse_time(since, "since"),
            until=parse_time(until, "until"),
        )
    except FilterError as exc:
        raise _fail(f"export: {exc}", 2) from None
    rows: Iterable[dict[str, Any]] = read_rows(sink_files(directory), row_filter)
    if limit is not None:
        rows = islice(rows, limit)
    pages = _pages(iter(rows))
    return parquet_chunks(pages) if format == "parquet" else jsonl_chunks(pages)


def _pages(rows: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    while page := list(islice(rows, EXPORT_PAGE)):
        yield page


# ---------------------------------------------------------------------------- regrade


def regrade(
    episode_id: Annotated[str, typer.Argument(help="a finished episode's id")],
    wait: Annotated[float, typer.Option(min=0, max=300, help="seconds to wait for it")] = 120,
    as_json: Annotated[bool, typer.Option("--json", help="old and new as JSON")] = False,
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
) -> None:
    """Grade a finished episode again with today's rules, judge and tests: old beside new."""
    from rich.console import Console
    from rich.table import Table

    from proctor.client import Client

    try:
        with Client(url, token=token) as client:
            both = client.regrade(episode_id, wait_s=wait)
    except ProctorError as exc:
        raise _fail(f"regrade: {exc}", 2 if isinstance(exc, ApiError) else 1) from None
    if as_json:
        typer.echo(both.model_dump_json(indent=2))
        return
    table = Table(title="regrade")
    table.add_column("")
    table.add_column("old")
    table.add_column("new")

    def cells(r: Any) -> list[str]:
        rules = sorted({e.rule for e in r.cheat.evidence if e.rule})
        return [
            r.id,
            r.status.value,
            r.verdict.value if r.verdict else "",
            "-" if r.reward is None else f"{r.reward:g}",
            r.reason,
            ", ".join(rules),
        ]

    for name, old, new in zip(
        ("id", "status", "verdict", "reward", "reason", "rules"),
        cells(both.old),
        cells(both.new),
        strict=True,
    ):
        table.add_row(name, plain(old, 60), plain(new, 60))
    Console().print(table)


def register(app: typer.Typer) -> None:
    """Add these commands to the `proctor` app."""
    app.command()(submit)
    app.command()(episodes)
    app.command()(show)
    app.command()(top)
    app.command()(export)
    app.command()(regrade)
