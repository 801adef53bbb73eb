"""Repository shapes a trainer may upload, built with real git, and the byte scan that
proves a sealed copy holds nothing of the base commit's future.

Every future object carries the marker `FUTURE-FIX` (in its content or message), so the
scan can look for it in decompressed bytes as well as for the future objects' ids.
"""

from __future__ import annotations

import base64
import io
import subprocess
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

MARKER = b"FUTURE-FIX"

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "PATH": "/usr/bin:/bin",
    "GIT_ALLOW_PROTOCOL": "file",
}


def git(repo: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(
        ["git", "-c", "protocol.file.allow=always", *args],
        cwd=repo,
        env={**ENV, "HOME": str(repo)},
        capture_output=True,
        text=True,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {args}: {done.stderr}")
    return done.stdout.strip()


@dataclass
class Upstream:
    """A repository with a past (old, base) and a future (the fix), plus side objects."""

    path: Path
    base: str
    future: str  # the fix commit, a child of base

    def future_objects(self) -> set[str]:
        """Every object of the future: in the fix's closure and not in the base's."""
        return _closure(self.path, self.future) - _closure(self.path, self.base)


def _closure(repo: Path, rev: str) -> set[str]:
    return {line.split()[0] for line in git(repo, "rev-list", "--objects", rev).splitlines()}


def upstream(root: Path) -> Upstream:
    path = root / "upstream"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "uploadpack.allowFilter", "true")  # partial clones of it are partial
    for i, name in enumerate(("old", "base")):
        (path / "lib.py").write_text(f"def f():\n    return {i}  # {name}\n")
        (path / "README").write_text(f"project at {name}\n")
        git(path, "add", ".")
        git(path, "commit", "-qm", name)
    base = git(path, "rev-parse", "HEAD")
    (path / "lib.py").write_text("def f():\n    return 42  # FUTURE-FIX\n")
    (path / "tests").mkdir()
    (path / "tests" / "test_fix.py").write_text("# FUTURE-FIX regression\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "FUTURE-FIX: the upstream fix")
    future = git(path, "rev-parse", "HEAD")
    git(path, "tag", "-a", "v2.0", "-m", "FUTURE-FIX release")
    return Upstream(path, base, future)


def archive_of(tree: Path) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for entry in sorted(tree.iterdir()):
            tar.add(entry, arcname=entry.name)
    return base64.b64encode(buffer.getvalue()).decode()


def unpack(archive: str, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(archive)), mode="r:gz") as tar:
        tar.extractall(into, filter="data")
    return into


def scan(tree: Path, forbidden: set[str]) -> list[str]:
    """Every trace of the future in an unpacked sealed tree: a forbidden object git lists,
    one a pack index names, a loose object's id, or the marker in any file's raw or
    zlib-decompressed bytes (loose objects, pack entries and their deltas)."""
    found: list[str] = []
    listed = git(tree, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    found += [f"git lists {s}" for s in set(listed.split()) & forbidden]
    for idx in (tree / ".git").rglob("*.idx"):
        verify = git(tree, "verify-pack", "-v", str(idx))
        shas = {line.split()[0] for line in verify.splitlines() if line[:1].isalnum()}
        found += [f"{idx.name} holds {s}" for s in shas & forbidden]
    raw_ids = {bytes.fromhex(s) for s in forbidden}
    for path in tree.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        rel = path.relative_to(tree).as_posix()
        parts = rel.split("/")
        loose = len(parts) >= 4 and parts[:2] == [".git", "objects"] and len(parts[2]) == 2
        if loose and parts[2] + parts[3] in forbidden:
            found.append(f"loose object {rel}")
        if MARKER in data:
            found.append(f"marker in {rel}")
        if any(s.encode() in data for s in forbidden):
            found.append(f"a future id in {rel}")
        if any(r in data for r in raw_ids):
            found.append(f"a future binary id in {rel}")
        found += [f"marker in a zlib stream of {rel}" for _ in range(_zlib_hits(data))]
    return found


def _zlib_hits(data: bytes) -> int:
    hits, start = 0, 0
    while (at := data.find(b"\x78", start)) != -1:
        start = at + 1
        try:
            out = zlib.decompressobj().decompress(data[at : at + (1 << 20)], 1 << 22)
        except zlib.error:
            continue
        if MARKER in out:
            hits += 1
    return hits
