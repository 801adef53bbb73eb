"""Uploads onto disk with their bounds: a tar, a gzip tar, a bundle are sealed; a bomb is
refused after a few MiB of output, not after what it would unpack to; other formats are
refused by name; a repository read out of an image keeps its build products only."""

from __future__ import annotations

import gzip
import io
import shutil
import tarfile
import zlib
from pathlib import Path

import pytest

from anticheat.git.seal import SealRefused, Source, seal_source
from anticheat.git.upload import MAX_RATIO, PIECE, RATIO_SLACK, READ, Spool, UploadTooLarge
from tests.unit.anticheat.git.test_seal import full_clone
from tests.unit.anticheat.git.zoo import git, scan, unpack, upstream

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _tar(tree: Path, *, arcname: str = ".") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(tree, arcname=arcname)
    return buffer.getvalue()


def _spooled(tmp: Path, data: bytes, *, max_bytes: int = 1 << 30) -> Spool:
    spool = Spool(tmp, max_bytes=max_bytes)
    for at in range(0, len(data), 1 << 16):
        spool.feed(data[at : at + (1 << 16)])
    return spool


@pytest.mark.parametrize("compressed", [False, True])
def test_a_full_clone_uploaded_as_tar_is_sealed(compressed: bool, tmp_path: Path) -> None:
    up = upstream(tmp_path)
    data = _tar(full_clone(up, tmp_path))
    if compressed:
        data = gzip.compress(data)
    (tmp_path / "spool").mkdir()
    source = _spooled(tmp_path / "spool", data).inflate()
    sealed = seal_source(source, base_commit=up.base[:10], branch="main")
    assert sealed.base_commit == up.base
    assert sealed.archive is not None
    out = unpack(sealed.archive, tmp_path / "out")
    assert scan(out, up.future_objects()) == []
    assert git(out, "rev-parse", "HEAD") == up.base


def test_a_bundle_upload_is_sealed(tmp_path: Path) -> None:
    up = upstream(tmp_path)
    git(up.path, "bundle", "create", str(tmp_path / "all.bundle"), "--all")
    (tmp_path / "spool").mkdir()
    source = _spooled(tmp_path / "spool", (tmp_path / "all.bundle").read_bytes()).inflate()
    assert source.bundle
    sealed = seal_source(source, base_commit=up.base, branch="main")
    assert sealed.archive is not None
    assert scan(unpack(sealed.archive, tmp_path / "out"), up.future_objects()) == []


def test_a_gzip_bomb_is_refused_after_a_bounded_output(tmp_path: Path) -> None:
    # 1 GiB of zeros in ~1 MiB of gzip: refused after less than 3 MiB of it is written
    inflater = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    bomb = b"".join(inflater.compress(block) for _ in range(1024)) + inflater.flush()
    assert len(bomb) < 2 << 20
    (tmp_path / "spool").mkdir()
    spool = _spooled(tmp_path / "spool", bomb)
    with pytest.raises(SealRefused, match="times its size"):
        spool.inflate()
    written = (tmp_path / "spool" / "upload.tar").stat().st_size
    assert written <= MAX_RATIO * READ + RATIO_SLACK + PIECE, written


def test_a_body_over_the_cap_is_refused_as_it_streams(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=100_000)
    spool.feed(bytes(60_000))
    with pytest.raises(UploadTooLarge):
        spool.feed(bytes(60_000))


@pytest.mark.parametrize(
    ("head", "name"), [(b"BZh91AY&SY", "bzip2"), (b"\xfd7zXZ\x00\x00", "xz"), (b"hello", "nor")]
)
def test_other_formats_are_refused_by_name(head: bytes, name: str, tmp_path: Path) -> None:
    spool = _spooled(tmp_path, head + bytes(600))
    with pytest.raises(SealRefused, match=name):
        spool.inflate()


def test_a_repository_read_out_of_an_image_keeps_its_build_products_only(
    tmp_path: Path,
) -> None:
    """As `docker cp` gives `/testbed`: a tar whose root is `testbed/`. Ignored files (what
    the image built in place) stay; an untracked file and the later history do not."""
    up = upstream(tmp_path)
    work = full_clone(up, tmp_path)  # with an untracked FUTURE-FIX file, stash, refs, ...
    git(work, "replace", "-d", up.base)  # so the commit below has the base's tree
    git(work, "reset", "-q", "--hard", up.base)
    (work / ".gitignore").write_text("build/\n")
    git(work, "add", ".gitignore")
    git(work, "commit", "-qm", "ignore the build")
    base = git(work, "rev-parse", "HEAD")
    (work / "build").mkdir()
    (work / "build" / "ext.so").write_bytes(b"\x7fELF built in place")
    (tmp_path / "image.tar").write_bytes(_tar(work, arcname="testbed"))
    source = Source(path=tmp_path / "image.tar", root="testbed", build_files=True)
    sealed = seal_source(source, base_commit=base, branch="main")
    assert sealed.archive is not None
    out = unpack(sealed.archive, tmp_path / "out")
    assert (out / "build" / "ext.so").read_bytes() == b"\x7fELF built in place"
    assert not (out / "scratch.py").exists()
    assert scan(out, up.future_objects()) == []
    assert git(out, "status", "--porcelain") == ""  # ignored files are not changes


def test_a_path_that_is_no_repository_is_refused(tmp_path: Path) -> None:
    tree = tmp_path / "notrepo"
    tree.mkdir()
    (tree / "README").write_text("no history\n")
    (tmp_path / "image.tar").write_bytes(_tar(tree, arcname="notrepo"))
    source = Source(path=tmp_path / "image.tar", root="notrepo", build_files=True)
    with pytest.raises(SealRefused, match=r"no `\.git`"):
        seal_source(source, base_commit="abcdef1", branch="main")


def test_git_runs_nothing_the_upload_configures(tmp_path: Path) -> None:
    """A hostile `.git/config` (an fsmonitor hook) in an image's repository never runs."""
    up = upstream(tmp_path)
    work = full_clone(up, tmp_path)
    marker = tmp_path / "ran"
    git(work, "config", "core.fsmonitor", f"touch {marker}; false")
    (tmp_path / "image.tar").write_bytes(_tar(work, arcname="testbed"))
    source = Source(path=tmp_path / "image.tar", root="testbed", build_files=True)
    seal_source(source, base_commit=up.base, branch="main")
    assert not marker.exists()
