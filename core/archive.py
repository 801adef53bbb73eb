"""Unpacking an uploaded tar archive (plain, gzip, bzip2 or xz) with its cost bounded.

    unpack_upload(data, dest)      # bytes or a binary stream → members unpacked, or
                                   # ArchiveRefused with the reason

The caps are checked while the archive streams through the decompressor, before the bytes
reach tarfile: what comes out may not pass `max_bytes` in all, nor `max_ratio` times what
went in (beyond a first `ratio_allowance`). A gzip bomb inflates about a thousandfold from
its first byte on, so it is refused after some megabytes of output, not after the gigabytes
it holds (a 1 MiB bomb cost the API 29 s when the caps were checked on the unpacked
members). Members are extracted with tarfile's `data` filter, or the same checks by hand
where Python lacks it: nothing outside `dest`, no devices, no links out, no owners.
`POST /v1/repos` inflates a gzip upload to disk with the same caps as it arrives
(anticheat/git/upload.py); its tar is then unpacked here, as an inline one is.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import posixpath
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from core import defaults

__all__ = ["ArchiveLimits", "ArchiveRefused", "unpack_upload"]


class ArchiveRefused(Exception):
    """The upload is not an archive we unpack: too large, too compressed, or unsafe (the
    caller's input, a 4xx; never our failure)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchiveLimits:
    max_bytes: int = defaults.ARCHIVE_MAX_BYTES
    max_ratio: int = defaults.ARCHIVE_MAX_RATIO
    ratio_allowance: int = defaults.ARCHIVE_RATIO_ALLOWANCE_BYTES
    max_members: int = defaults.ARCHIVE_MAX_MEMBERS


def unpack_upload(
    data: bytes | IO[bytes], dest: Path, *, limits: ArchiveLimits | None = None
) -> int:
    """Unpack `data` (the archive, or a stream of it) into the directory `dest` (which must
    exist); the number of members."""
    limits = limits or ArchiveLimits()
    counted = _Counted(io.BytesIO(data) if isinstance(data, bytes) else data)
    stream = _Bounded(_decompressed(counted), counted, limits)
    members = 0

    def checked(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
        nonlocal members
        for member in tar:
            members += 1
            if members > limits.max_members:
                raise ArchiveRefused(f"the archive has more than {limits.max_members} members")
            yield member if hasattr(tarfile, "data_filter") else data_member(member)

    try:
        # stream mode: each member is extracted as it is read, and nothing seeks back
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, members=checked(tar), filter="data")
            else:  # Python < 3.11.4 (Debian's 3.11.2): the same checks by hand
                tar.extractall(dest, members=checked(tar))
    except ArchiveRefused:
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError, lzma.LZMAError) as exc:
        raise ArchiveRefused(f"the archive cannot be unpacked safely: {exc}") from None
    return members


class _Counted(io.RawIOBase):
    """The upload's bytes, counting how many the decompressor has taken."""

    def __init__(self, source: IO[bytes]) -> None:
        self.source = source
        self.taken = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        chunk = self.source.read(len(buffer))
        n = len(chunk)
        buffer[:n] = chunk
        self.taken += n
        return n


def _decompressed(counted: _Counted) -> io.BufferedIOBase:
    """A reader of the archive's tar stream: the decompressors read `counted` in chunks
    and hand out at most what is asked of them per call."""
    source = io.BufferedReader(counted)
    data = source.peek(6)[:6]
    if data[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=source, mode="rb")
    if data[:3] == b"BZh":
        return bz2.BZ2File(source, mode="rb")
    if data[:6] == b"\xfd7zXZ\x00":
        return lzma.LZMAFile(source, mode="rb")
    return source


class _Bounded(io.RawIOBase):
    """The tar stream, refused as soon as it outgrows the caps."""

    def __init__(self, inner: io.BufferedIOBase, counted: _Counted, limits: ArchiveLimits) -> None:
        self.inner = inner
        self.counted = counted
        self.limits = limits
        self.produced = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        chunk = self.inner.read(min(len(buffer), 1 << 16))
        n = len(chunk)
        buffer[:n] = chunk
        self.produced += n
        limits = self.limits
        if self.produced > limits.max_bytes:
            raise ArchiveRefused(f"the archive unpacks to more than {limits.max_bytes >> 20} MiB")
        if self.produced > limits.ratio_allowance + limits.max_ratio * self.counted.taken:
            raise ArchiveRefused(
                f"the archive unpacks to more than {limits.max_ratio} times its size"
            )
        return n


def data_member(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """What tarfile's `data` filter does to a member, for Pythons that lack it: nothing
    outside the destination, no special files, no links out, no owner or odd modes."""
    name = member.name
    if name.startswith("/") or ".." in PurePosixPath(name).parts:
        raise ArchiveRefused(f"the archive has a member outside it: {name}")
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise ArchiveRefused(f"the archive has a special file: {name}")
    if member.issym() or member.islnk():
        base = PurePosixPath(name).parent if member.issym() else PurePosixPath()
        target = posixpath.normpath(str(base / member.linkname))
        if member.linkname.startswith("/") or target == ".." or target.startswith("../"):
            raise ArchiveRefused(f"the archive has a link out of it: {name}")
    member.uid, member.gid, member.uname, member.gname = os.getuid(), os.getgid(), "", ""
    executable = member.mode & 0o100
    member.mode = (
        (0o755 if member.isdir() or executable else 0o644) if not member.issym() else 0o777
    )
    return member
