"""The Docker engine as the image build uses it, through the `docker` CLI (the only caller).

The CLI rather than the SDK: the build runs from a client install too, and `docker build`
with a context on stdin and `--network none` is exactly what the CLI does best.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from proctor.imagebuild.config import ImageBuildError

_PY_VERSION = 'import sys; print("%d.%d" % sys.version_info[:2])'


def require_docker() -> None:
    if shutil.which("docker") is None:
        raise ImageBuildError("docker is not installed (scripts/setup.sh installs it)")


def _inspect(image: str, template: str) -> str | None:
    done = subprocess.run(
        ["docker", "image", "inspect", "-f", template, image],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def image_id(image: str) -> str | None:
    """The image's id, or None when it is not present locally."""
    return _inspect(image, "{{.Id}}")


def label(image: str, name: str) -> str:
    """One label of a local image; "" when the image or the label is absent."""
    return _inspect(image, f'{{{{index .Config.Labels "{name}"}}}}') or ""


def size_bytes(image: str) -> int:
    return int(_inspect(image, "{{.Size}}") or 0)


def pull(image: str, timeout_s: float) -> bool:
    """Pull within the timeout; False when the registry does not deliver in time."""
    try:
        done = subprocess.run(
            ["docker", "pull", "-q", image], capture_output=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def python_version(image: str) -> str | None:
    """major.minor of the image's python3, run with no network; None if it has none."""
    done = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "--entrypoint",
            "python3",
            image,
            "-c",
            _PY_VERSION,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def read_file(image: str, path: str) -> bytes | None:
    """A file of the image, read by `cat` in a throwaway offline container; None if absent."""
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--entrypoint", "cat", image, path],
        capture_output=True,
        check=False,
    )
    return done.stdout if done.returncode == 0 else None


def run_python_on_tar(
    image: str, script: str, root: Path, args: Sequence[str] = ()
) -> subprocess.CompletedProcess[bytes]:
    """Run `python3 -c script` in the image, offline, with `root` as a tar on its stdin.

    The files go in on stdin, not by a bind mount, so this works from a container too.
    """
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        tar.add(root, arcname=".")
    command = [
        "docker",
        "run",
        "-i",
        "--rm",
        "--network",
        "none",
        "--entrypoint",
        "python3",
        image,
        "-c",
        script,
        *args,
    ]
    return subprocess.run(command, input=buffer.getvalue(), capture_output=True, check=False)


def build(
    *,
    image: str,
    dockerfile: str,
    context: Sequence[tuple[Path, str]],
    build_args: dict[str, str],
    labels: dict[str, str],
    network: str,
    no_cache: bool,
    log: Path,
) -> bool:
    """`docker build` of a context streamed as a tar of exactly (path, name in the context).

    No .dockerignore: the context is what the Dockerfile needs and nothing else. The build's
    output goes to `log`; False when the build failed.
    """
    command = ["docker", "build", "--force-rm", "--network", network]
    if no_cache:
        command.append("--no-cache")
    for key, value in build_args.items():
        command += ["--build-arg", f"{key}={value}"]
    for key, value in labels.items():
        command += ["--label", f"{key}={value}"]
    command += ["-f", dockerfile, "-t", image, "-"]
    with (
        log.open("wb") as out,
        subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT
        ) as proc,
    ):
        assert proc.stdin is not None
        _write_tar(proc.stdin, context)
        return proc.wait() == 0


def push(image: str, *, log: Path) -> bool:
    """`docker push` with the CLI's own credentials (~/.docker/config.json); its output to
    `log`; False when the push failed."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        return subprocess.run(["docker", "push", image], stdout=out, stderr=out).returncode == 0


def remove(image_or_id: str) -> None:
    """Remove an image if nothing uses it; the engine refuses while containers still do,
    and that refusal is fine (the old image goes with its last container)."""
    subprocess.run(["docker", "rmi", image_or_id], capture_output=True, check=False)


def prune_stage(label: str) -> None:
    """Remove the untagged images a multi-stage build left behind, by the label its stage
    carries: the classic builder keeps each stage as an image, whose layers would cost the
    disk twice. Images of other builds are not touched."""
    subprocess.run(
        ["docker", "image", "prune", "--force", "--filter", f"label={label}"],
        capture_output=True,
        check=False,
    )


def _write_tar(stream: IO[bytes], members: Sequence[tuple[Path, str]]) -> None:
    """Stream a tar of the members into the pipe and close it. A reader that exits early
    (a build that fails at once) breaks the pipe; that is not the error to report, the
    build's exit status and log are."""
    # GNU format, as GNU tar writes: no PAX header before the first member, where the
    # docker CLI looks to tell a context archive from a Dockerfile on stdin
    with (
        contextlib.suppress(BrokenPipeError),
        tarfile.open(fileobj=stream, mode="w|", format=tarfile.GNU_FORMAT) as tar,
    ):
        for path, name in members:
            tar.add(path, arcname=name)
    with contextlib.suppress(BrokenPipeError):
        stream.close()
