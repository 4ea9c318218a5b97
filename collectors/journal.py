"""The agent's write-ahead journal: what it collected is on disk before it is queued.

The writer's spool covers InfluxDB being away; this covers the agent itself dying. Each
emitted batch is appended (fsync'd) to the open segment; the writer thread cuts the journal
when it takes the queue, and deletes the cut segments once the writer has delivered or
spooled those points. After a crash, the segments left behind are replayed at start. A
replay may send a point InfluxDB already has; it keeps one point per series and timestamp.

>>> import tempfile
>>> journal = Journal(Path(tempfile.mkdtemp()))
>>> journal.append(["host,cluster=c,node=n load1=0.5 1"])
>>> sealed = journal.cut()
>>> Journal(journal.directory).leftover_lines()  # what a restart would replay
['host,cluster=c,node=n load1=0.5 1']
>>> journal.release(sealed); Journal(journal.directory).leftover_lines()
[]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

_PREFIX, _SUFFIX = "journal-", ".lp"


class Journal:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        existing = self.segments()
        self._next = 1 + max((int(p.stem[len(_PREFIX) :]) for p in existing), default=0)
        self._current: BinaryIO | None = None

    def segments(self) -> list[Path]:
        return sorted(self.directory.glob(f"{_PREFIX}*{_SUFFIX}"))

    def leftover_lines(self) -> list[str]:
        """Complete lines of every segment on disk (a torn last line is dropped)."""
        lines: list[str] = []
        for path in self.segments():
            text = path.read_bytes().decode(errors="replace")
            lines += [line for line in text.split("\n")[:-1] if line]
        return lines

    def append(self, lines: list[str]) -> None:
        if self._current is None:
            path = self.directory / f"{_PREFIX}{self._next:012d}{_SUFFIX}"
            self._next += 1
            self._current = path.open("ab")
        self._current.write("".join(line + "\n" for line in lines).encode())
        self._current.flush()
        os.fsync(self._current.fileno())

    def cut(self) -> list[Path]:
        """Closes the open segment; returns every segment written so far."""
        if self._current is not None:
            self._current.close()
            self._current = None
        return self.segments()

    def release(self, segments: list[Path]) -> None:
        """Deletes segments whose points the writer has delivered or spooled."""
        for path in segments:
            path.unlink(missing_ok=True)
        descriptor = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
