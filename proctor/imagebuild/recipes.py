"""What each image is built from, hashed: an image whose recipe label matches is kept.

A recipe is the first 16 hex digits of a SHA-256 over the Dockerfile, the base and the
packages (for the service image also the source and the host's pinned versions), hashed
byte for byte as images/build.sh hashed them, so images it built stay up to date.
"""

from __future__ import annotations

import hashlib
import subprocess
import tomllib
from collections.abc import Iterable
from pathlib import Path

# Besides the packages: what `pip wheel` of the checkout reads.
PROJECT_FILES = ("pyproject.toml", "README.md", "LICENSE")
# the server's packages' own pyproject (its wheel is built for the service image only)
SERVER_PYPROJECT = Path("images") / "service" / "server-pyproject.toml"


def digest(parts: Iterable[bytes]) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part)
    return sha.hexdigest()[:16]


def lines(*values: str) -> bytes:
    """Values as `echo` wrote them into the hash: one per line."""
    return "".join(f"{value}\n" for value in values).encode()


def simple(dockerfile: Path, *values: str) -> str:
    """The recipe of an image made of a Dockerfile and a few values (base, packages, pins)."""
    return digest([dockerfile.read_bytes(), lines(*values)])


def top_level_packages(repo: Path, *, server: bool = True) -> list[str]:
    """The packages the wheels ship, from the `packages.find` include (`core*` → core) of
    the client's pyproject and (`server`) the server's: one list, so a new top-level
    package is in the service image by itself."""
    found: set[str] = set()
    for path in (repo / "pyproject.toml", repo / SERVER_PYPROJECT)[: 2 if server else 1]:
        with path.open("rb") as f:
            pyproject = tomllib.load(f)
        include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
        found |= {pattern.split(".")[0].rstrip("*") for pattern in include}
    return sorted(found)


def source_files(repo: Path) -> list[str]:
    """The files a wheel of this checkout is built from: tracked and new ones, uncommitted
    edits included, deleted ones left out; sorted byte-wise."""
    done = subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            "--",
            *top_level_packages(repo),
            *PROJECT_FILES,
        ],
        capture_output=True,
        check=True,
    )
    names = {name.decode() for name in done.stdout.split(b"\0") if name}
    return sorted(
        (name for name in names if (repo / name).is_file()), key=lambda name: name.encode()
    )


def source_digest(repo: Path, files: Iterable[str]) -> str:
    """The hash of the source: of `sha256sum`'s lines for each file (hash, two spaces, path)."""
    listing = "".join(
        f"{hashlib.sha256((repo / name).read_bytes()).hexdigest()}  {name}\n" for name in files
    )
    return digest([listing.encode()])


def service(dockerfile: Path, base: str, source: str, constraints: str) -> str:
    server = dockerfile.with_name(SERVER_PYPROJECT.name)
    parts = [dockerfile.read_bytes(), lines(base, source), constraints.encode()]
    return digest([*parts, server.read_bytes()] if server.exists() else parts)
