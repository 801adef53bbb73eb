"""A task's environment image from a spec (`proctor images build-task SPEC.json`), offline.

The image is a local base (the Python sandbox image by default) with the task's repository
at its path (`/testbed`), checked out at its base commit, and the task's dependencies
installed from wheels made on the host: no container here reaches a package archive, and
no registry is needed. It is pushed when its name is a registry's (`host[:port]/…`) or the
spec says so.

SPEC.json (paths relative to the spec's directory):

    image          the name to tag, e.g. 127.0.0.1:5000/swe/django__django-11099:latest
    repo           {"bundle": "repo.bundle"} or {"archive": "repo.tar.gz"} (a tar of the
                   working tree with its .git), "base_commit" (default: the bundle's or
                   archive's HEAD), "path" (default /testbed)
    base           the local base image (default proctor/sandbox-python:latest)
    python         major.minor the base's python3 must be (checked; optional)
    requirements   pip requirement lines; "requirements_file": a file of them
    install        shell commands run in the repository at build time, offline, with the
                   wheels at hand (PIP_NO_INDEX, PIP_FIND_LINKS): e.g. "pip install -e ."
    test_command   how the task's tests run (kept as the image's label, for the dataset)
    user           uid:gid that owns the repository (default 1000:1000, the sandbox user)
    push           true/false (default: when `image` names a registry)

The repository keeps only its base commit's past: every ref but a detached HEAD at the
base, every remote, tag, stash and reflog removed and unreachable objects pruned, so the
image carries no later commit (the sandbox's own sealing at an episode's start, where a
task asks for it, is the guarantee; this keeps the image itself clean). docs/images.md maps
SWE-bench and SWE-Gym instances onto this spec.
"""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import proctor.imagebuild.engine as engine
from proctor.imagebuild.config import BuildConfig, ImageBuildError
from proctor.imagebuild.wheels import download_binary, pip, tail

logger = logging.getLogger(__name__)

DEFAULT_BASE = "proctor/sandbox-python:latest"
WHEELS = "/tmp/proctor-task-wheels"
BUILD_TOOLS = ("setuptools", "wheel")  # what `pip install -e .` builds with, offline
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "PATH": "/usr/bin:/bin",
}
LABEL_PREFIX = "org.proctor.task."


@dataclass(frozen=True, kw_only=True)
class TaskImageSpec:
    image: str
    source: Path  # the bundle or archive
    bundle: bool
    base_commit: str | None
    path: str = "/testbed"
    base: str = DEFAULT_BASE
    python: str | None = None
    requirements: list[str] = field(default_factory=list)
    install: list[str] = field(default_factory=list)
    test_command: str | None = None
    user: str = "1000:1000"
    push: bool = False

    @classmethod
    def load(cls, spec_file: Path) -> TaskImageSpec:
        try:
            raw = json.loads(spec_file.read_text())
        except (OSError, ValueError) as exc:
            raise ImageBuildError(f"{spec_file}: cannot read the spec ({exc})") from exc
        return cls.parse(raw, root=spec_file.parent)

    @classmethod
    def parse(cls, raw: Any, *, root: Path) -> TaskImageSpec:
        if not isinstance(raw, dict):
            raise ImageBuildError("a task image spec is a JSON object")
        known = {
            "image", "repo", "base", "python", "requirements", "requirements_file",
            "install", "test_command", "user", "push",
        }  # fmt: skip
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ImageBuildError(f"unknown spec fields: {', '.join(unknown)}")
        image = _text(raw, "image", required=True) or ""
        repo = raw.get("repo")
        if not isinstance(repo, dict) or ("bundle" in repo) == ("archive" in repo):
            raise ImageBuildError('"repo" needs one of "bundle" or "archive"')
        bundle = "bundle" in repo
        source = root / str(repo["bundle" if bundle else "archive"])
        if not source.is_file():
            raise ImageBuildError(f"{source}: no such file")
        path = str(repo.get("path") or "/testbed")
        if not path.startswith("/") or path.rstrip("/") in ("", "/tmp", "/workspace"):
            raise ImageBuildError(f"repo.path {path!r}: an absolute path of its own")
        requirements = [str(r) for r in raw.get("requirements") or []]
        if raw.get("requirements_file"):
            lines = (root / str(raw["requirements_file"])).read_text().splitlines()
            requirements += [line for line in lines if line.strip()]
        install = raw.get("install") or []
        if isinstance(install, str):
            install = [install]
        push = raw.get("push")
        return cls(
            image=image,
            source=source,
            bundle=bundle,
            base_commit=repo.get("base_commit") or None,
            path=path.rstrip("/"),
            base=_text(raw, "base") or DEFAULT_BASE,
            python=_text(raw, "python"),
            requirements=requirements,
            install=[str(c) for c in install],
            test_command=_text(raw, "test_command"),
            user=_text(raw, "user") or "1000:1000",
            push=bool(push) if push is not None else names_registry(image),
        )


def _text(raw: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = raw.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise ImageBuildError(f'"{key}" must be a non-empty string')
    return value


def names_registry(image: str) -> bool:
    """Whether an image name starts with a registry host (`host.domain`, `host:port`,
    `localhost`), as Docker reads names."""
    first, slash, _ = image.partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost")


def _git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise ImageBuildError(f"git {' '.join(args)} failed", done.stderr[-2000:])
    return done.stdout.strip()


def prepare_repository(spec: TaskImageSpec, dest: Path) -> str:
    """The repository in `dest` at its base commit, with nothing after it; the base commit."""
    if spec.bundle:
        _git("clone", "--quiet", "--no-checkout", str(spec.source), str(dest))
    else:
        dest.mkdir(parents=True)
        with tarfile.open(spec.source) as tar:
            tar.extractall(dest, filter="data")
        if not (dest / ".git").is_dir():
            if spec.base_commit:
                raise ImageBuildError("base_commit needs the archive's .git (the history)")
            return ""
    base = _git("rev-parse", "--verify", f"{spec.base_commit or 'HEAD'}^{{commit}}", cwd=dest)
    _git("checkout", "--quiet", "--force", "--detach", base, cwd=dest)
    for remote in _git("remote", cwd=dest).split():
        _git("remote", "remove", remote, cwd=dest)
    for ref in _git("for-each-ref", "--format=%(refname)", cwd=dest).split():
        _git("update-ref", "-d", ref, cwd=dest)
    _git("reflog", "expire", "--expire=now", "--all", cwd=dest)
    _git("gc", "--quiet", "--prune=now", cwd=dest)
    return base


def download_wheels(config: BuildConfig, spec: TaskImageSpec, python: str, dest: Path) -> None:
    """The requirements and the build tools as wheels for the base's Python, made on the
    host: binary wheels for its platform where they exist, else built by the host's pip
    (only when the host's Python is the base's: a wheel built here is for this one)."""
    dest.mkdir(parents=True)
    (dest / "requirements.txt").write_text("".join(f"{r}\n" for r in spec.requirements))
    log = config.run_dir / "task-image-wheels.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    binary = download_binary(
        config,
        python,
        platform_machine(),
        dest,
        *BUILD_TOOLS,
        "-r",
        str(dest / "requirements.txt"),
        log=log,
    )
    if binary.returncode == 0:
        return
    if python != config.host_python:
        raise ImageBuildError(
            f"a requirement has no binary wheel for Python {python}, and the host's Python "
            f"({config.host_python}) cannot build one for it (log: {log})",
            tail(log),
        )
    logger.info("a requirement has no binary wheel: building wheels on the host")
    built = pip(
        config,
        "wheel",
        "--quiet",
        "--wheel-dir",
        str(dest),
        *BUILD_TOOLS,
        "-r",
        str(dest / "requirements.txt"),
        log=log,
        append=True,
    )
    if built.returncode != 0:
        raise ImageBuildError(f"pip wheel of the requirements failed (log: {log})", tail(log))


def platform_machine() -> str:
    import platform

    return platform.machine() or "x86_64"


def dockerfile(spec: TaskImageSpec, base_commit: str) -> str:
    pip_env = f"PIP_NO_INDEX=1 PIP_FIND_LINKS={WHEELS} PIP_BREAK_SYSTEM_PACKAGES=1"
    pip_env += " PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_NO_CACHE_DIR=1"
    lines = [
        f"FROM {spec.base}",
        "USER 0:0",
        f"COPY wheels/ {WHEELS}/",
        f"COPY --chown={spec.user} repo/ {spec.path}/",
    ]
    if spec.requirements:
        lines.append(f"RUN {pip_env} python3 -m pip install -r {WHEELS}/requirements.txt")
    for command in spec.install:
        lines.append(f"RUN cd {shlex.quote(spec.path)} && {pip_env} sh -ec {shlex.quote(command)}")
    # what the install commands wrote in the repository stays the sandbox user's
    lines.append(f"RUN chown -R {spec.user} {shlex.quote(spec.path)} && rm -rf {WHEELS}")
    lines += [f"WORKDIR {spec.path}", f"USER {spec.user}"]
    return "\n".join(lines) + "\n"


def labels(spec: TaskImageSpec, base_commit: str) -> dict[str, str]:
    found = {"path": spec.path, "base_commit": base_commit, "test_command": spec.test_command}
    return {LABEL_PREFIX + key: value for key, value in found.items() if value}


def build_task_image(spec: TaskImageSpec, config: BuildConfig) -> str:
    """Build (and push, where the spec says so) the task image; its name."""
    engine.require_docker()
    if engine.image_id(spec.base) is None:
        raise ImageBuildError(f"the base {spec.base} is not local (`proctor images build`)")
    python = engine.python_version(spec.base)
    if python is None:
        raise ImageBuildError(f"the base {spec.base} has no python3")
    if spec.python and spec.python != python:
        raise ImageBuildError(f"the spec asks for Python {spec.python}; {spec.base} has {python}")
    with tempfile.TemporaryDirectory(prefix="proctor-task-image-") as scratch:
        context = Path(scratch)
        base_commit = prepare_repository(spec, context / "repo")
        download_wheels(config, spec, python, context / "wheels")
        (context / "Dockerfile").write_text(dockerfile(spec, base_commit))
        log = config.run_dir / "task-image-build.log"
        built = engine.build(
            image=spec.image,
            dockerfile="Dockerfile",
            context=[(context / name, name) for name in ("Dockerfile", "repo", "wheels")],
            build_args={},
            labels=labels(spec, base_commit),
            network="none",
            no_cache=False,
            log=log,
        )
        if not built:
            raise ImageBuildError(f"docker build of {spec.image} failed (log: {log})", tail(log))
    logger.info("built %s (%s at %s)", spec.image, spec.path, base_commit[:12] or "no git")
    if spec.push:
        pushed = engine.push(spec.image, log=config.run_dir / "task-image-push.log")
        if not pushed:
            raise ImageBuildError(f"docker push {spec.image} failed")
        logger.info("pushed %s", spec.image)
    return spec.image
