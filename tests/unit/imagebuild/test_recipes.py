"""Recipes hash as images/build.sh hashed them (images it built stay up to date), and the
service image ships every top-level package."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from proctor.imagebuild import recipes

ROOT = Path(__file__).resolve().parents[3]


def shell(script: str, cwd: Path) -> str:
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_recipe_is_the_sha256_of_the_dockerfile_and_its_values(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM scratch\n# no newline at the end")
    expected = shell(
        '{ cat Dockerfile; echo "python:3.12-slim"; echo "pytest>=8"; } | sha256sum | cut -c1-16',
        tmp_path,
    )
    assert recipes.simple(dockerfile, "python:3.12-slim", "pytest>=8") == expected


def test_the_source_digest_is_the_sha256_of_sha256sums_lines(tmp_path: Path) -> None:
    names = ["a.py", "pkg/b.py", "pkg/sub/c.txt"]
    for index, name in enumerate(names):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"content {index}\n")
    expected = shell(
        "printf '%s\\0' "
        + " ".join(names)
        + " | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16",
        tmp_path,
    )
    assert recipes.source_digest(tmp_path, names) == expected


def test_the_service_image_ships_the_packages_the_makefile_lints() -> None:
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(r"^PACKAGES := (.+)$", makefile, re.MULTILINE)
    assert match is not None
    packages = recipes.top_level_packages(ROOT)
    assert packages == sorted(match.group(1).split())
    assert all((ROOT / package / "__init__.py").is_file() for package in packages)


def test_the_source_is_every_file_of_those_packages() -> None:
    files = recipes.source_files(ROOT)
    assert "pyproject.toml" in files
    assert "proctor/imagebuild/recipes.py" in files
    assert {name.split("/")[0] for name in files if "/" in name} == set(
        recipes.top_level_packages(ROOT)
    )
