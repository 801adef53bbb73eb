"""The `Snapshot` op keeps what the grading puts back byte for byte: text as text, other
files as bytes; a file too large to keep whole, a link and a FIFO are left out, and a FIFO
never blocks the runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from workers.sandbox.protocol import Program, Snapshot, SnapshotResult
from workers.sandbox.sandbox import BOOT, boot_input, runner_source


def snapshot(root: Path, paths: list[str], max_bytes: int) -> SnapshotResult:
    op = Snapshot(paths=paths, root=str(root), max_bytes=max_bytes)
    source = runner_source()
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", BOOT],
        input=boot_input(source) + Program([op]).request("n"),
        capture_output=True,
        timeout=30,
        check=True,
    )
    result = json.loads(done.stdout)["results"]["0"]
    return SnapshotResult(**{k: v for k, v in result.items() if k != "kind"})


def test_text_and_binary_files_come_back_as_they_are(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    (tests / "data").mkdir(parents=True)
    (tests / "test_a.py").write_text("def test_a():\n    assert 'é'\n")
    (tests / "data" / "blob.bin").write_bytes(bytes(range(256)))
    (tests / "data" / "big.txt").write_text("x" * 301)
    (tests / "link.py").symlink_to(tests / "test_a.py")
    os.mkfifo(tests / "pipe")
    result = snapshot(tmp_path, ["tests/"], max_bytes=300)
    assert result.contents() == {
        "tests/test_a.py": "def test_a():\n    assert 'é'\n",
        "tests/data/blob.bin": bytes(range(256)),
    }
