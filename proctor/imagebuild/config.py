"""What an image build is told by its environment, read once; and its one error type.

ImageBuildError       a build step failed; `detail` holds the tail of its log
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# Nothing is pulled when no registry answers: this base, debootstrapped from the host's
# Debian mirror by images/base/bootstrap.sh, replaces any base that cannot be had.
OFFLINE_BASE = "proctor/base:bookworm"


class ImageBuildError(Exception):
    """A step of an image build failed (the message says which; `detail` shows why)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


@dataclass(frozen=True, kw_only=True)
class BuildConfig:
    """The knobs of docs/configuration.md's "Image builds" section, read once.

    base_image          sandbox base                 BASE_IMAGE (python:3.12-slim)
    service_base_image  service and judge base       SERVICE_BASE_IMAGE
                                                     (python:3.X-slim-bookworm, X: the host's)
    redis_base_image    Redis base                   REDIS_BASE_IMAGE (redis:7-bookworm)
    language_base_image base of the language         LANGUAGE_BASE_IMAGE
                        sandboxes (cpp, java, ...)   (proctor/sandbox-python:latest)
    sandbox_packages    pip requirements, sandbox    SANDBOX_PY_PACKAGES ("pytest>=8")
    pip                 host pip command             PIP (.venv's, else python3's)
    pull_timeout_s      seconds a pull may take      PULL_TIMEOUT (20; a slower pull counts
                                                     as no registry)
    wheel_cache         compiled llama-cpp-python    PROCTOR_WHEEL_CACHE
                                                     (~/.cache/proctor-wheels)
    """

    repo: Path
    base_image: str
    service_base_image: str
    redis_base_image: str
    language_base_image: str
    sandbox_packages: str  # as given: whitespace-separated requirements
    pip: tuple[str, ...]
    host_python: str
    pull_timeout_s: float
    wheel_cache: Path

    @property
    def images_dir(self) -> Path:
        return self.repo / "images"

    @property
    def wheels_dir(self) -> Path:
        return self.repo / "images" / ".wheels"

    @property
    def run_dir(self) -> Path:
        return self.repo / ".run"

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] = os.environ, repo: Path = REPO_ROOT
    ) -> BuildConfig:
        pip = tuple(shlex.split(environ.get("PIP", ""))) or _default_pip(repo)
        host = _python_version(pip)
        cache = environ.get("PROCTOR_WHEEL_CACHE") or str(
            Path(environ.get("XDG_CACHE_HOME") or Path(environ.get("HOME", "~")) / ".cache")
            / "proctor-wheels"
        )
        try:
            timeout = float(environ.get("PULL_TIMEOUT", "20"))
        except ValueError as err:
            message = f"PULL_TIMEOUT={environ['PULL_TIMEOUT']!r} is not a number"
            raise ImageBuildError(message) from err
        return cls(
            repo=repo,
            base_image=environ.get("BASE_IMAGE") or "python:3.12-slim",
            service_base_image=environ.get("SERVICE_BASE_IMAGE") or f"python:{host}-slim-bookworm",
            redis_base_image=environ.get("REDIS_BASE_IMAGE") or "redis:7-bookworm",
            language_base_image=environ.get("LANGUAGE_BASE_IMAGE")
            or "proctor/sandbox-python:latest",
            sandbox_packages=environ.get("SANDBOX_PY_PACKAGES") or "pytest>=8",
            pip=pip,
            host_python=host,
            pull_timeout_s=timeout,
            wheel_cache=Path(cache).expanduser(),
        )


def _default_pip(repo: Path) -> tuple[str, ...]:
    venv_python = repo / ".venv" / "bin" / "python"
    if os.access(venv_python, os.X_OK):
        return (str(venv_python), "-m", "pip")
    return ("python3", "-m", "pip")


_VERSION = 'import sys; print("%d.%d" % sys.version_info[:2])'


def _python_version(pip: tuple[str, ...]) -> str:
    """major.minor of the interpreter behind the pip command: its wheels are for that one.

    A PIP that is not `python -m pip` (say `pip3.11`) cannot run code; then python3's.
    """
    for python in (pip[0], "python3", sys.executable):
        try:
            done = subprocess.run(
                [python, "-c", _VERSION], capture_output=True, text=True, check=False
            )
        except OSError:
            continue
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    raise ImageBuildError(f"cannot find the Python version behind {shlex.join(pip)}")
