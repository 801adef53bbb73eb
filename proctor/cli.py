"""The `proctor` command: run the service and workers, build images, talk to a service.

Server commands import `service` and `workers` lazily, so the client install (pydantic +
httpx + typer) is enough for the client commands.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from proctor import cli_episodes, cli_images

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Proctor: sandboxed code-execution rewards for RL.",
)
images_app = typer.Typer(no_args_is_help=True, help="Sandbox and service images.")
app.add_typer(images_app, name="images")
cli_episodes.register(app)  # submit, episodes, show, top, export, regrade
cli_images.register(images_app)  # images prefetch, images build-task

REPO_ROOT = Path(__file__).resolve().parent.parent
# Open long waits (`?wait=`) would hold a stop for minutes: past this, connections are cut
# and clients retry (identical requests find their episode again).
SHUTDOWN_GRACE_S = 3

UrlOption = Annotated[str, typer.Option(envvar="PROCTOR_URL", help="service URL")]
TokenOption = Annotated[str | None, typer.Option(envvar="PROCTOR_TOKEN", help="bearer token")]


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="bind address")] = None,
    port: Annotated[int | None, typer.Option(help="port")] = None,
    workers: Annotated[int, typer.Option(help="API processes")] = 1,
) -> None:
    """Serve the HTTP API (no workers: start those with `proctor worker`); also on
    PROCTOR_SANDBOXFUSION_PORT when that is set."""
    from core.config import get_settings
    from service import serving

    settings = get_settings()
    listen = serving.Listen(
        host=host or settings.host,
        port=port or settings.port,
        workers=workers,
        graceful_shutdown_s=SHUTDOWN_GRACE_S,
    )
    serving.serve(settings, listen)


@app.command()
def worker(
    concurrency: Annotated[int | None, typer.Option(help="worker processes")] = None,
    burst: Annotated[bool, typer.Option(help="exit when the queues are empty")] = False,
) -> None:
    """Run worker processes on this host (they need Docker and Redis)."""
    from core.config import get_settings
    from workers.main import run

    raise typer.Exit(run(get_settings(), concurrency=concurrency, burst=burst))


@app.command("run")
def run_all(
    concurrency: Annotated[int | None, typer.Option(help="worker processes")] = None,
) -> None:
    """Serve the API and run workers in one command (the local default)."""
    import multiprocessing
    import signal

    from core.config import get_settings
    from service import serving
    from workers.main import run

    settings = get_settings()
    context = multiprocessing.get_context("spawn")
    workers = context.Process(
        target=run, args=(settings,), kwargs={"concurrency": concurrency}, name="workers"
    )
    workers.start()

    def stop_workers(signum: int = signal.SIGTERM, _frame: object = None) -> None:
        if workers.is_alive():
            workers.terminate()
        workers.join(timeout=60)
        raise SystemExit(0)

    # uvicorn re-raises the stop signal once it has shut down; this handler then stops
    # the workers too, instead of the default action leaving them orphaned
    signal.signal(signal.SIGTERM, stop_workers)
    signal.signal(signal.SIGINT, stop_workers)
    listen = serving.Listen(
        host=settings.host, port=settings.port, graceful_shutdown_s=SHUTDOWN_GRACE_S
    )
    serving.serve(settings, listen)
    stop_workers()


@app.command()
def openapi(
    output: Annotated[Path | None, typer.Option(help="write here instead of stdout")] = None,
) -> None:
    """Print the OpenAPI document generated from the app."""
    from service.openapi_doc import render

    text = render()
    if output:
        output.write_text(text)
    else:
        sys.stdout.write(text)


@images_app.command("build")
def images_build(
    images: Annotated[
        list[str] | None,
        typer.Argument(
            help="sandbox, sandbox-sci, the language sandboxes, service, redis, judge "
            "(default: all but the judge)",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="rebuild without the layer cache even if up to date (the offline base is "
            "kept: images/base/bootstrap.sh rebuilds it)",
        ),
    ] = False,
) -> None:
    """Build Proctor's images; one whose recipe did not change is kept.

    With no registry (a base neither local nor pullable within PULL_TIMEOUT),
    the bases are replaced by proctor/base:bookworm, debootstrapped from the
    host's Debian mirror, and the builds run offline. Python packages are
    wheels made on the host. Env: BASE_IMAGE, SERVICE_BASE_IMAGE,
    REDIS_BASE_IMAGE, SANDBOX_PY_PACKAGES, PIP, PULL_TIMEOUT
    (docs/configuration.md).
    """
    import logging

    from proctor import imagebuild

    targets = images or list(imagebuild.DEFAULT_TARGETS)
    unknown = [name for name in targets if name not in imagebuild.IMAGES]
    if unknown:
        typer.echo(
            f"images: unknown {' '.join(unknown)}; known: {' '.join(imagebuild.IMAGES)}", err=True
        )
        raise typer.Exit(2)
    if not (REPO_ROOT / "images").is_dir():
        typer.echo(
            f"{REPO_ROOT / 'images'} not found: run this from a checkout of Proctor", err=True
        )
        raise typer.Exit(2)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("images: %(message)s"))
    package_logger = logging.getLogger("proctor.imagebuild")
    package_logger.addHandler(handler)
    package_logger.setLevel(logging.INFO)
    try:
        imagebuild.build(targets, force=force)
    except imagebuild.ImageBuildError as err:
        if err.detail:
            typer.echo(err.detail, err=True)
        typer.echo(f"images: {err}", err=True)
        raise typer.Exit(1) from None


@app.command()
def screen(
    url: Annotated[
        str | None,
        typer.Option(envvar="PROCTOR_URL", help="screen on a service instead of locally"),
    ] = None,
    token: TokenOption = None,
) -> None:
    """Screen actions (JSON lines on stdin) with the rule filter; one verdict per line out.

    Extra fields of each line (an `id`, a label) are copied to its verdict.
    """
    from proctor.models import ScreenItem

    lines = [line for line in sys.stdin.read().splitlines() if line.strip()]
    raw = [json.loads(line) for line in lines]
    items = [ScreenItem.model_validate(r) for r in raw]
    if url:
        from proctor.client import Client

        with Client(url, token=token) as client:
            verdicts = client.screen(items)
    else:
        from anticheat.screen import screen as screen_action

        verdicts = [screen_action(i.action, i.task) for i in items]
    for source, verdict in zip(raw, verdicts, strict=True):
        extra = {k: v for k, v in source.items() if k not in ("action", "task")}
        typer.echo(json.dumps({**extra, **verdict.model_dump(mode="json")}))


@app.command()
def rules() -> None:
    """List the rule filter's rules."""
    from anticheat.rules import RULES

    typer.echo(f"{'id':32} {'category':20} {'decision':9} {'level':8} {'no judge':9} description")
    for rule in RULES:
        fallback = rule.fallback if rule.decision == "review" else "-"
        typer.echo(
            f"{rule.id:32} {rule.category:20} {rule.decision:9} {rule.level:8} {fallback:9} "
            f"{rule.description}"
        )


if __name__ == "__main__":
    app()
