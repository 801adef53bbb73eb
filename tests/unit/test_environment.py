"""Nothing of the server reads the environment but `Settings` (core/config.py, through
pydantic-settings): a variable read anywhere else is a setting nobody can find in
docs/configuration.md. Read from the source (ast). The client package `proctor` reads its
own variables (PROCTOR_URL, PROCTOR_TOKEN and PROCTOR_TASKS_FILE in
proctor/integrations/_env.py and the CLI's options, the image build's knobs in
proctor/imagebuild/config.py): it runs in
a trainer's environment or builds images, never as the server. Scripts under `assets/` run
inside sandboxes, not in the server's processes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER = ("core", "anticheat", "service", "workers")
READERS = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in READERS
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: os.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno}: from os import {a.name}"
                for a in node.names
                if a.name in READERS
            ]
    return found


@pytest.mark.parametrize("package", SERVER)
def test_the_server_reads_the_environment_only_through_settings(package: str) -> None:
    paths = sorted(p for p in (ROOT / package).rglob("*.py") if "assets" not in p.parts)
    assert [line for p in paths for line in reads(p)] == []
