"""An on-disk, append-only spool of line protocol: where the writer keeps what it could not send.

The spool is a directory of numbered segment files, each plain line protocol, one point a line.
Appends are fsync'd before :meth:`Spool.append` returns, so a point the writer has spooled
survives ``kill -9``. Segments are read back oldest first and deleted only once delivered; a
crash during replay resends a segment from its start, which is harmless because InfluxDB
overwrites a point with the same series and timestamp.

A kill in the middle of an append can leave a torn last line; reading drops it (it was never
acknowledged as spooled). When the spool would grow past ``max_bytes`` the oldest segment is
dropped, counted and logged: the newest data is the most useful for finding a faulty node now.

>>> import tempfile
>>> spool = Spool(Path(tempfile.mkdtemp()))
>>> spool.append(["host,cluster=c,node=n load1=0.5 1", "host,cluster=c,node=n load1=0.7 2"])
0
>>> segment = spool.oldest()
>>> segment.lines
['host,cluster=c,node=n load1=0.5 1', 'host,cluster=c,node=n load1=0.7 2']
>>> spool.remove(segment); spool.empty
True
>>> spool.close()
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

_log = logging.getLogger(__name__)
_PREFIX, _SUFFIX = "segment-", ".lp"


class SpoolLockedError(RuntimeError):
    """Another live writer holds this spool directory."""


@dataclass(frozen=True)
class Segment:
    path: Path
    lines: list[str]
    size_bytes: int


class Spool:
    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int = 1 << 30,
        segment_bytes: int = 4 << 20,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_bytes, self.segment_bytes = max_bytes, segment_bytes
        # Two writers appending to one spool would interleave and double-replay; refuse it.
        self._lock = (self.directory / ".lock").open("a")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise SpoolLockedError(f"{self.directory} is in use by another writer") from None
        self._sizes = {path: path.stat().st_size for path in self._segment_paths()}
        self._next_number = self._number(max(self._sizes)) + 1 if self._sizes else 0
        self._current: IO[bytes] | None = None  # always a fresh segment: an old tail may be torn
        self._current_path: Path | None = None

    @property
    def empty(self) -> bool:
        return not self._sizes

    @property
    def size_bytes(self) -> int:
        return sum(self._sizes.values())

    def append(self, lines: Sequence[str]) -> int:
        """Appends lines durably; returns how many points were dropped to stay under max_bytes."""
        data = "".join(line + "\n" for line in lines).encode()
        dropped = self._make_room(len(data))
        if len(data) > self.max_bytes:
            _log.error("spool full: a batch of %d points is larger than the spool", len(lines))
            return dropped + len(lines)
        for _ in range(len(self._sizes) + 1):
            try:
                self._write(data)
                return dropped
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                # The disk filled up before max_bytes did. Same policy: the newest data
                # wins, so the oldest segment goes, and the write is tried again.
                freed = self._drop_oldest()
                if freed is None:
                    break
                dropped += freed
        _log.error(
            "spool disk full at %s: dropped a batch of %d points", self.directory, len(lines)
        )
        return dropped + len(lines)

    def _write(self, data: bytes) -> None:
        path = self._current_path
        if path is None or self._sizes[path] + len(data) > self.segment_bytes:
            path = self._rotate()
        handle = self._current
        assert handle is not None
        try:
            view = memoryview(data)
            while view:  # an unbuffered write may take only part of the data
                written = handle.write(view)
                if not written:
                    raise OSError(errno.ENOSPC, "no space left on the spool's disk")
                view = view[written:]
            os.fsync(handle.fileno())
        except OSError:
            # A half-written batch would glue its torn tail to the next line: cut it off.
            os.ftruncate(handle.fileno(), self._sizes[path])
            raise
        self._sizes[path] += len(data)

    def _drop_oldest(self) -> int | None:
        """Frees the oldest segment (sealing it if it is the one being written); its points,
        or None when there is nothing left to free."""
        if not any(self._sizes.values()):
            return None
        segment = self.oldest()
        assert segment is not None
        self.remove(segment)
        _log.error(
            "spool disk full at %s: dropped its oldest segment %s with %d points",
            self.directory,
            segment.path.name,
            len(segment.lines),
        )
        return len(segment.lines)

    def oldest(self) -> Segment | None:
        """The oldest segment and its complete lines, or None when the spool is empty."""
        if not self._sizes:
            return None
        path = min(self._sizes)
        if path == self._current_path:
            self._seal()  # never read a file that is still being appended to
        raw = path.read_bytes()
        text = raw.decode(errors="replace")
        lines = text.split("\n")
        if lines[-1]:
            _log.warning("spool segment %s ends with a torn line; dropping that line", path.name)
        return Segment(path, [line for line in lines[:-1] if line], len(raw))

    def remove(self, segment: Segment) -> None:
        """Deletes a delivered segment."""
        if segment.path == self._current_path:
            self._seal()
        segment.path.unlink(missing_ok=True)
        self._sizes.pop(segment.path, None)
        _fsync_directory(self.directory)

    def close(self) -> None:
        self._seal()
        self._lock.close()

    # ---- internals ------------------------------------------------------------------------

    def _make_room(self, incoming: int) -> int:
        dropped = 0
        while self._sizes and self.size_bytes + incoming > self.max_bytes:
            segment = self.oldest()
            assert segment is not None
            self.remove(segment)
            dropped += len(segment.lines)
            _log.error(
                "spool full (%d bytes max): dropped its oldest segment %s with %d points",
                self.max_bytes,
                segment.path.name,
                len(segment.lines),
            )
        return dropped

    def _rotate(self) -> Path:
        self._seal()
        path = self.directory / f"{_PREFIX}{self._next_number:012d}{_SUFFIX}"
        self._next_number += 1
        # Unbuffered: a failed write must not linger in a buffer and land on a later flush.
        self._current, self._current_path = path.open("ab", buffering=0), path
        self._sizes[path] = 0
        _fsync_directory(self.directory)
        return path

    def _seal(self) -> None:
        if self._current is not None:
            self._current.close()
        self._current, self._current_path = None, None

    def _segment_paths(self) -> list[Path]:
        return sorted(self.directory.glob(f"{_PREFIX}*{_SUFFIX}"))

    @staticmethod
    def _number(path: Path) -> int:
        return int(path.name[len(_PREFIX) : -len(_SUFFIX)])


def _fsync_directory(directory: Path) -> None:
    # A new or deleted file name is durable only once its directory is synced.
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
