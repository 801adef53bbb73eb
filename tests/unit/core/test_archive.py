"""Unpacking an upload with its cost bounded: bombs refused after a few megabytes of output
(in every compression tarfile reads), honest archives unpacked whole."""

from __future__ import annotations

import base64
import bz2
import functools
import io
import lzma
import tarfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from anticheat.git.seal import SealRefused, seal
from core.archive import ArchiveLimits, ArchiveRefused, unpack_upload
from proctor.models import RepoSnapshot

BOMB_BYTES = 64 << 20  # zeros in one member: compressed, 64 KiB or less


def bomb_tar() -> Iterator[bytes]:
    """The tar stream of one member of zeros, in chunks (never whole in memory)."""
    info = tarfile.TarInfo("zeros")
    info.size = BOMB_BYTES
    yield info.tobuf(format=tarfile.GNU_FORMAT)
    chunk = bytes(1 << 20)
    for _ in range(BOMB_BYTES >> 20):
        yield chunk
    yield bytes(2 * tarfile.BLOCKSIZE)


@functools.cache
def gzip_bomb() -> bytes:
    out = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip container
    return b"".join(out.compress(c) for c in bomb_tar()) + out.flush()


@functools.cache
def bz2_bomb() -> bytes:
    out = bz2.BZ2Compressor(9)
    return b"".join(out.compress(c) for c in bomb_tar()) + out.flush()


@functools.cache
def xz_bomb() -> bytes:
    out = lzma.LZMACompressor(preset=1)
    return b"".join(out.compress(c) for c in bomb_tar()) + out.flush()


def unpacked_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("make", [gzip_bomb, bz2_bomb, xz_bomb], ids=["gzip", "bz2", "xz"])
def test_a_bomb_is_refused_after_a_few_megabytes(make: Callable[[], bytes], tmp_path: Path) -> None:
    data = make()
    limits = ArchiveLimits()
    with pytest.raises(ArchiveRefused, match="times its size"):
        unpack_upload(data, tmp_path)
    # what reached the disk before the refusal: the caps, not the archive's 64 MiB
    assert unpacked_bytes(tmp_path) <= limits.ratio_allowance + limits.max_ratio * len(data) + (
        1 << 20
    )


def test_sealing_refuses_a_bomb_by_its_ratio() -> None:
    """The API seals uploads in the request: a bomb is refused by the caps, before git."""
    data = gzip_bomb()
    snapshot = RepoSnapshot(archive=_b64(data), base_commit="0" * 40, branch="main")
    with pytest.raises(SealRefused, match="times its size"):
        seal(snapshot)


def test_the_size_cap_holds_whatever_the_ratio(tmp_path: Path) -> None:
    files = {f"f{i}.txt": bytes(range(256)) * 64 for i in range(64)}  # 1 MiB, incompressible-ish
    with pytest.raises(ArchiveRefused, match="unpacks to more than"):
        unpack_upload(_tar(files, "w"), tmp_path, limits=ArchiveLimits(max_bytes=256 << 10))


def test_the_member_cap(tmp_path: Path) -> None:
    files = {f"f{i}": b"" for i in range(20)}
    with pytest.raises(ArchiveRefused, match="more than 10 members"):
        unpack_upload(_tar(files, "w:gz"), tmp_path, limits=ArchiveLimits(max_members=10))


@pytest.mark.parametrize("mode", ["w", "w:gz", "w:bz2", "w:xz"])
def test_an_honest_archive_unpacks_whole(mode: str, tmp_path: Path) -> None:
    # many small files: tar pads each to 512 bytes, so the ratio is high in the first MiB
    files = {f"src/m{i}.py": f"X = {i}\n".encode() for i in range(1000)}
    files["README"] = b"hello\n" * 10_000
    assert unpack_upload(_tar(files, mode), tmp_path) == len(files) + 1  # and src/
    assert (tmp_path / "src" / "m999.py").read_bytes() == b"X = 999\n"
    assert unpacked_bytes(tmp_path) == sum(len(v) for v in files.values())


def test_a_truncated_archive_is_refused(tmp_path: Path) -> None:
    data = _tar({"a": b"x" * 10_000}, "w:gz")
    with pytest.raises(ArchiveRefused, match="cannot be unpacked"):
        unpack_upload(data[: len(data) // 2], tmp_path)


def _tar(files: dict[str, bytes], mode: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:  # type: ignore[call-overload]
        if any("/" in name for name in files):
            directory = tarfile.TarInfo("src")
            directory.type = tarfile.DIRTYPE
            directory.mode = 0o755
            tar.addfile(directory)
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
