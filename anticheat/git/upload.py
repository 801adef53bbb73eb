"""A repository upload onto disk, bounded as it streams, ready for `seal_source`.

    spool = Spool(directory, max_bytes=...)      # the API feeds it the body's chunks
    spool.feed(chunk)                            # UploadTooLarge past max_bytes
    source = spool.inflate()                     # SealRefused: not a tar/bundle, or a bomb

What arrives is a tar (plain or gzip) or a git bundle, told apart by its first bytes. A
gzip stream is inflated to disk a bounded piece at a time, and refused as soon as what it
unpacks to passes `MAX_UNPACKED_BYTES`, or `MAX_RATIO` times what it was read from (plus
`RATIO_SLACK`): a bomb is refused after at most a few MiB of output, in milliseconds,
whatever it would unpack to. Sizes the tar's headers declare are checked again when it is
unpacked (`seal.py`).
"""

from __future__ import annotations

import hashlib
import zlib
from pathlib import Path
from typing import BinaryIO

from anticheat.git.seal import MAX_UNPACKED_BYTES, SealRefused, Source
from core import defaults

__all__ = ["MAX_RATIO", "PIECE", "RATIO_SLACK", "READ", "Spool", "UploadTooLarge"]

# the caps of every upload (core/archive.py checks the same while a tar unpacks): source
# trees gzip ~5-10x, git packs ~1x, so past MAX_RATIO it is a bomb; RATIO_SLACK is what a
# small archive may unpack to whatever its ratio
MAX_RATIO = defaults.ARCHIVE_MAX_RATIO
RATIO_SLACK = defaults.ARCHIVE_RATIO_ALLOWANCE_BYTES
PIECE = 1 << 18  # output inflated per step, so the checks run between steps
READ = 1 << 14  # input read per step: a bomb's first read may unpack to MAX_RATIO times it
_GZIP = b"\x1f\x8b"
_BUNDLES = (b"# v2 git bundle\n", b"# v3 git bundle\n")
_OTHER_COMPRESSIONS = {b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}


class UploadTooLarge(SealRefused):
    """The upload's body is over the size the deployment takes."""


class Spool:
    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int,
        max_unpacked: int = MAX_UNPACKED_BYTES,
        max_ratio: int = MAX_RATIO,
    ) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.max_unpacked = max_unpacked
        self.max_ratio = max_ratio
        self.raw = directory / "upload.raw"
        self._file: BinaryIO = self.raw.open("wb")
        self._hash = hashlib.sha256()
        self.size = 0

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            self._file.close()
            raise UploadTooLarge(f"the upload is over {self.max_bytes >> 20} MiB")
        self._hash.update(chunk)
        self._file.write(chunk)

    @property
    def digest(self) -> str:
        return self._hash.hexdigest()

    def inflate(self) -> Source:
        """What was fed, as a tar or bundle on disk; SealRefused when it is neither, or a
        gzip stream breaks a bound."""
        self._file.close()
        with self.raw.open("rb") as raw:
            head = raw.read(512)
        if head.startswith(_BUNDLES):
            return Source(path=self.raw, bundle=True)
        if head.startswith(_GZIP):
            return Source(path=self._gunzip())
        if head[257:262] == b"ustar":
            return Source(path=self.raw)
        for magic, name in _OTHER_COMPRESSIONS.items():
            if head.startswith(magic):
                raise SealRefused(f"a {name} archive: upload a plain or gzip tar")
        raise SealRefused("not a tar archive (plain or gzip) nor a git bundle")

    def _gunzip(self) -> Path:
        out_path = self.directory / "upload.tar"
        read = written = 0
        inflater = zlib.decompressobj(wbits=31)
        with self.raw.open("rb") as raw, out_path.open("wb") as out:
            pending = b""
            while True:
                if not pending:
                    pending = raw.read(READ)
                    read += len(pending)
                    if not pending:
                        break
                try:
                    piece = inflater.decompress(pending, PIECE)
                except zlib.error as exc:
                    raise SealRefused(f"the gzip stream is corrupt: {exc}") from None
                pending = inflater.unconsumed_tail
                if inflater.eof:  # a next gzip member follows, or the stream is over
                    pending = inflater.unused_data
                    inflater = zlib.decompressobj(wbits=31)
                written += len(piece)
                if written > self.max_unpacked:
                    raise SealRefused(
                        f"the archive unpacks to more than {self.max_unpacked >> 20} MiB"
                    )
                if written > self.max_ratio * read + RATIO_SLACK:
                    raise SealRefused(
                        f"the archive unpacks to more than {self.max_ratio} times its size "
                        "(a decompression bomb?)"
                    )
                out.write(piece)
            out.write(inflater.flush())  # what a last bounded step left in zlib's window
        return out_path
