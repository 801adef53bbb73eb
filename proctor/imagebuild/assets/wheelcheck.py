"""Run inside a base image (`python3 -c`, no network): are the host-built wheels enough?

The host resolved the wheels for its own interpreter; the base's may differ in a patch
version and so in environment markers (redis needs async-timeout below Python 3.11.3).
Reads a tar of the wheel directory (with its requirements.txt) on stdin, lets the base's
own pip resolve it offline, and prints one JSON object:

    {"complete": true}
    {"complete": false, "missing": ["async-timeout>=4.0.3", ...], "pip": "<its last lines>"}

`missing` comes from walking the wheels' metadata with the base's environment markers,
not from pip's error text. Standard library and pip only: this is not imported on the host.
"""

from __future__ import annotations

import email.parser
import importlib
import json
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any


def _packaging(module: str) -> Any:
    """pip's own copy of packaging: every base that installs wheels has pip, few have
    packaging itself (which a pip that unbundles its dependencies uses instead)."""
    try:
        return importlib.import_module(f"pip._vendor.packaging.{module}")
    except ImportError:
        return importlib.import_module(f"packaging.{module}")


Requirement = _packaging("requirements").Requirement
canonicalize_name = _packaging("utils").canonicalize_name
parse_wheel_filename = _packaging("utils").parse_wheel_filename


def requires_dist(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.endswith(".dist-info/METADATA") and name.count("/") == 1:
                metadata = email.parser.Parser().parsestr(archive.read(name).decode())
                return list(metadata.get_all("Requires-Dist") or [])
    return []


def missing(wheel_dir: Path, requirements: list[str]) -> list[str]:
    """Requirements (without their markers, one per project) that no wheel in the
    directory satisfies, following every dependency whose marker holds here, extras
    included."""
    wheels: dict[str, list[tuple[Any, Path]]] = {}
    for path in wheel_dir.glob("*.whl"):
        name, version, _, _ = parse_wheel_filename(path.name)
        wheels.setdefault(name, []).append((version, path))
    absent: dict[str, tuple[set[str], set[str]]] = {}  # name: (extras, specifiers)
    seen: set[tuple[str, frozenset[str]]] = set()
    todo: list[tuple[Any, frozenset[str]]] = [
        (Requirement(line), frozenset()) for line in requirements
    ]
    while todo:
        req, parent_extras = todo.pop()
        if req.marker is not None and not any(
            req.marker.evaluate({"extra": extra}) for extra in parent_extras | {""}
        ):
            continue
        name = canonicalize_name(req.name)
        found = [
            (version, path)
            for version, path in wheels.get(name, [])
            if req.specifier.contains(version, prereleases=True)
        ]
        if not found:
            extras, specifiers = absent.setdefault(name, (set(), set()))
            extras.update(req.extras)
            specifiers.update(str(spec) for spec in req.specifier)
            continue
        key = (name, frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        _, path = max(found, key=lambda pair: pair[0])
        todo += [(Requirement(dep), frozenset(req.extras)) for dep in requires_dist(path)]
    return [
        name + (f"[{','.join(sorted(extras))}]" if extras else "") + ",".join(sorted(specs))
        for name, (extras, specs) in absent.items()
    ]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        wheel_dir, scratch = Path(tmp, "w"), Path(tmp, "d")
        with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as tar:
            if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
                tar.extractall(wheel_dir, filter="data")
            else:
                tar.extractall(wheel_dir)
        requirements_file = wheel_dir / "requirements.txt"
        pip = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--disable-pip-version-check",
                "-q",
                "--no-index",
                "--find-links",
                str(wheel_dir),
                "-d",
                str(scratch),
                "-r",
                str(requirements_file),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if pip.returncode == 0:
            print(json.dumps({"complete": True}))
            return
        lines = [line.strip() for line in requirements_file.read_text().splitlines()]
        tail = "\n".join((pip.stdout + pip.stderr).splitlines()[-20:])
        print(
            json.dumps(
                {
                    "complete": False,
                    "missing": missing(wheel_dir, [line for line in lines if line]),
                    "pip": tail,
                }
            )
        )


main()
