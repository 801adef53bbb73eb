"""The runner's walks and clean-up take any tree the code under test can make: thousands of
levels deep (past the recursion limit, PATH_MAX and the open files limit), names with
newlines and bytes that are not UTF-8, directories without permissions, symlink loops and
hard links — without recursion, without following a link out of the tree."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from workers.sandbox.sandbox import runner_source

NAMES = [b"d", b"new\nline", b"\xff\xfe", b"n" * 200]


@pytest.fixture(scope="module")
def runner() -> dict[str, Any]:
    """The runner's functions, as its script defines them in a sandbox."""
    namespace: dict[str, Any] = {"__name__": "proctor_runner"}
    exec(compile(runner_source("pass"), "proctor-runner", "exec"), namespace)
    return namespace


@pytest.fixture
def tree(tmp_path: Path, runner: dict[str, Any]) -> Iterator[Path]:
    """A directory for a deep tree, removed after the test whatever it left (pytest's own
    clean-up of its temporary directories recurses)."""
    (tmp_path / "tree").mkdir()
    yield tmp_path / "tree"
    runner["remove_tree"](str(tmp_path / "tree"))


def deep_tree(top: Path, depth: int) -> None:
    """`depth` nested directories under `top`, by descriptor (their paths outgrow PATH_MAX),
    with a planted file, a hard link and a loop every 20 levels and a directory of mode
    000 every 700."""
    fd = os.open(top, os.O_RDONLY)
    locked = []
    for level in range(depth):
        name = NAMES[level % len(NAMES)]
        os.mkdir(name, dir_fd=fd)
        below = os.open(name, os.O_RDONLY, dir_fd=fd)
        if level % 20 == 0:
            os.close(os.open("conftest.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=below))
            os.link("conftest.py", "hard.pth", src_dir_fd=below, dst_dir_fd=below)
            os.symlink("..", "loop", dir_fd=below)
        if fd not in locked:
            os.close(fd)
        fd = below
        if level % 700 == 699:
            locked.append(below)
    for held in locked:
        os.chmod(held, 0)
        os.close(held)
    os.close(fd)


def test_a_tree_past_every_limit_is_removed(
    tmp_path: Path, tree: Path, runner: dict[str, Any]
) -> None:
    deep_tree(tree, 5000)
    (tmp_path / "outside").write_text("kept")
    (tree / "out").symlink_to(tmp_path / "outside")
    runner["remove_tree"](str(tree))
    assert sorted(os.listdir(tmp_path)) == ["outside"]


def test_removing_a_file_a_link_and_nothing(tmp_path: Path, runner: dict[str, Any]) -> None:
    remove: Callable[[str], None] = runner["remove_tree"]
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "f").write_text("kept")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    (tmp_path / "file").write_text("x")
    for name in ("link", "file", "missing"):
        remove(str(tmp_path / name))
    assert os.listdir(tmp_path) == ["target"] and os.listdir(tmp_path / "target") == ["f"]


def test_find_and_snapshot_walk_what_paths_reach(tree: Path, runner: dict[str, Any]) -> None:
    deep_tree(tree, 3000)
    found = runner["find"](str(tree), ["conftest.py", "*.pth"])
    # paths reach PATH_MAX some 75 levels down: what is deeper, no tool names
    assert len(found) >= 6 and all(p.endswith(("conftest.py", "hard.pth")) for p in found)
    snapshot = runner["op_snapshot"](runner["Snapshot"](paths=["d/"], root=str(tree)))
    assert set(snapshot.files) == {p for p in found if p.startswith("d/")}
    runner["remove_tree"](str(tree / "d"))
    assert os.listdir(tree) == []


def test_scrub_removes_planted_files_of_a_deep_tree(tree: Path, runner: dict[str, Any]) -> None:
    deep_tree(tree, 2000)
    done = runner["op_scrub"](runner["Scrub"](names=["conftest.py"], root=str(tree)))
    assert done.removed and all(not (tree / p).exists() for p in done.removed)
