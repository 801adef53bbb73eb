"""`proctor images prefetch FILE`: warm every worker host for a dataset's task images.

Registered on the `proctor images` group by proctor/cli.py. FILE is a dataset (JSON Lines
of episode requests or tasks, or a JSON list of them) or a list of references, one a line;
the images by reference it names are prefetched (the deployment's image names are on
every host already), and the progress is printed until every host has answered.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from proctor.client import DEFAULT_URL, ApiError, ProctorError
from proctor.imageref import is_reference
from proctor.prefetch import PullState

UrlOption = Annotated[str, typer.Option(envvar="PROCTOR_URL", help="service URL")]
TokenOption = Annotated[str | None, typer.Option(envvar="PROCTOR_TOKEN", help="bearer token")]
POLL_S = 1.0
FAILED = (PullState.not_found, PullState.failed)


def image_of(item: Any) -> str | None:
    """The task image an item of a dataset names: an episode request's `task.image`, a
    task's `image`, or the item itself when it is a string."""
    if isinstance(item, str):
        return item.strip() or None
    if not isinstance(item, dict):
        return None
    nested = item.get("task")
    task: dict[str, Any] = nested if isinstance(nested, dict) else item
    image = task.get("image")
    return image if isinstance(image, str) else None


def images_in(path: Path) -> list[str]:
    """The distinct image references a dataset or list names, in their first order."""
    text = path.read_text()
    if text.lstrip().startswith("["):
        items: list[Any] = list(json.loads(text))
    else:
        items = []
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            items.append(json.loads(line) if line.startswith("{") else line)
    found = (image_of(item) for item in items)
    return list(dict.fromkeys(i for i in found if i and is_reference(i)))


def register(images_app: typer.Typer) -> None:
    images_app.command("prefetch")(prefetch)
    images_app.command("build-task")(build_task)


def build_task(
    spec: Annotated[Path, typer.Argument(help="the task image's SPEC.json")],
) -> None:
    """Build a task's environment image from a spec, offline: the repository at its path
    and base commit, its dependencies installed from wheels made on the host; pushed when
    its name is a registry's. The spec's fields: proctor/imagebuild/taskimage.py and
    docs/images.md (with the SWE-bench and SWE-Gym field mapping)."""
    import logging
    import sys

    from proctor.imagebuild.config import BuildConfig, ImageBuildError
    from proctor.imagebuild.taskimage import TaskImageSpec, build_task_image

    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("images: %(message)s"))
    package_logger = logging.getLogger("proctor.imagebuild")
    package_logger.addHandler(handler)
    package_logger.setLevel(logging.INFO)
    try:
        typer.echo(build_task_image(TaskImageSpec.load(spec), BuildConfig.from_env()))
    except ImageBuildError as err:
        if err.detail:
            typer.echo(err.detail, err=True)
        typer.echo(f"images: {err}", err=True)
        raise typer.Exit(1) from None


def prefetch(
    file: Annotated[Path, typer.Argument(help="a dataset (JSONL or JSON) or a list of references")],
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    wait: Annotated[bool, typer.Option(help="poll until every host has answered")] = True,
) -> None:
    """Pull a dataset's task images on every worker host now, not at their first episode."""
    from proctor.client import Client

    images = images_in(file)
    if not images:
        typer.echo(f"{file}: no image references (names of the deployment need no prefetch)")
        return
    try:
        with Client(url, token=token) as client:
            status = client.prefetch_images(images)
            typer.echo(
                f"prefetch {status.id}: {len(status.images)} images on {len(status.hosts)} hosts"
            )
            while wait and not status.complete:
                time.sleep(POLL_S)
                status = client.prefetch_progress(status.id)
                counts = " ".join(f"{k}={v}" for k, v in sorted(status.counts.items()))
                typer.echo(f"  {status.done}/{status.total} {counts}")
    except ApiError as exc:
        typer.echo(f"prefetch refused: {exc}", err=True)
        raise typer.Exit(2) from None
    except ProctorError as exc:
        typer.echo(f"prefetch: {exc}", err=True)
        raise typer.Exit(1) from None
    bad = [p for p in status.pulls if p.state in FAILED]
    for pull in bad:
        typer.echo(f"{pull.host} {pull.image}: {pull.state.value}: {pull.detail}", err=True)
    if bad:
        raise typer.Exit(1)
