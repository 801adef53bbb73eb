"""The durable sink: finished episodes appended to rotating JSON Lines files on disk.

Redis keeps an episode for `PROCTOR_RESULT_TTL_S`; a week-long run that wants its episodes
as a dataset at its end turns the sink on (`PROCTOR_SINK_DIR`). The process that stores a
terminal result (`EpisodeStore.finish`, when it won) appends its row (core/exported.py)
to its own file (names: proctor/dataset.py), which rotates each UTC day and at
`PROCTOR_SINK_MAX_BYTES`. Each row is handed to the OS with one `write` as it is stored, so
a worker killed the next moment loses nothing; the file is fsynced when it is closed,
not per row (an fsync costs milliseconds, the budget is one per episode), so a host that
loses power may lose its last seconds of rows. A sink that cannot write (disk full) logs and
counts the failure and leaves the episode's result as it is: the sink is a copy, Redis is
the truth.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from core.config import Settings
from core.exported import export_line
from proctor.dataset import FILE_PATTERN, file_name, safe_writer

log = logging.getLogger(__name__)


class EpisodeSink:
    """Appends rows to `{directory}/episodes-{day}-{writer}-{seq}.jsonl`; thread-safe."""

    @classmethod
    def of(cls, settings: Settings, writer: str) -> EpisodeSink | None:
        """The sink a process writes its finished episodes to, when the deployment has one."""
        if settings.sink_dir is None:
            return None
        return cls(settings.sink_dir, writer=writer, max_bytes=settings.sink_max_bytes)

    def __init__(
        self,
        directory: Path,
        *,
        writer: str,
        max_bytes: int,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.directory = directory
        self.clock = clock  # what day it is decides the file
        self.writer = safe_writer(writer)
        self.max_bytes = max_bytes
        self.failures = 0
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._day = ""
        self._seq = 0
        self._size = 0
        self.path: Path | None = None

    def write(self, request_json: str | bytes, result_json: str | bytes) -> None:
        """Append one finished episode's row; never raises for the sink's own failures."""
        try:
            data = export_line(request_json, result_json)
            with self._lock:
                fd = self._file_for(len(data))
                written = os.write(fd, data)
                while written < len(data):  # a short write: the rest, or the row is torn
                    written += os.write(fd, data[written:])
                self._size += len(data)
        except (OSError, ValueError, TypeError) as exc:
            self.failures += 1
            log.error("sink %s: could not write an episode: %s", self.directory, exc)

    def _file_for(self, size: int) -> int:
        day = self.clock().strftime("%Y-%m-%d")
        if self._fd is not None and (
            day != self._day or (self._size > 0 and self._size + size > self.max_bytes)
        ):
            self._close()
        if self._fd is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            if day != self._day:
                self._day, self._seq = day, self._last_seq(day)
            self._seq += 1
            self.path = self.directory / file_name(day, self.writer, self._seq)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self._size = os.fstat(self._fd).st_size
        return self._fd

    def _last_seq(self, day: str) -> int:
        """The writer's last file of the day (a restarted worker starts a new one after it)."""
        last = 0
        for path in self.directory.iterdir():
            match = FILE_PATTERN.match(path.name)
            if match and match.group(1) == day and match.group(2) == self.writer:
                last = max(last, int(match.group(3)))
        return last

    def _close(self) -> None:
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None

    def close(self) -> None:
        with self._lock:
            self._close()
