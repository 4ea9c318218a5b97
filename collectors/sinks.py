"""Where the agent's points go: stdout as line protocol, or InfluxDB through the Writer.

:class:`WriterSink` keeps network time off the collection loop: ``emit`` only appends to a
bounded queue, and a thread of its own hands batches to ``influx.writer.Writer`` and flushes
every ``flush_interval_s``, or at once when an event (an XID, a GPU lost) arrives. The
Writer spools to disk while InfluxDB is away; the queue overflows only when the Writer itself
is stuck, and what overflows is counted in ``dropped``.

>>> import io
>>> out = io.StringIO()
>>> sink = StdoutSink(out)
>>> sink.emit([Point("host", {"cluster": "c", "node": "n"}, {"load1": 0.5}, 1)])
>>> out.getvalue()
'host,cluster=c,node=n load1=0.5 1\\n'
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any, Protocol, TextIO

from reflex_localize.collectors.journal import Journal
from reflex_localize.schemas.codec import Point, PointError, encode

log = logging.getLogger(__name__)


def _lines(points: list[Point]) -> list[str]:
    """Line protocol for the journal; a point that breaks the schema is left to the writer,
    which counts it, rather than raised into the collection loop."""
    lines = []
    for point in points:
        try:
            lines.append(encode(point))
        except PointError:
            continue
    return lines


class PointWriter(Protocol):
    def write(self, points: Any) -> None: ...
    def flush(self, wait_s: float = ...) -> bool: ...
    def close(self, wait_s: float = ...) -> bool: ...


class StdoutSink:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.refused = 0  # points that broke the schema, so far
        self._lock = threading.Lock()

    def emit(self, points: list[Point]) -> None:
        lines = _lines(points)  # one bad point must not take its batch down with it
        if len(lines) < len(points):
            before, self.refused = self.refused, self.refused + len(points) - len(lines)
            if before < 10 or before // 1000 != self.refused // 1000:  # not one line a batch
                log.warning("%d points broke the schema and were not printed", self.refused)
        text = "".join(line + "\n" for line in lines)
        with self._lock:
            self.stream.write(text)
            self.stream.flush()

    def close(self) -> None:
        pass


class WriterSink:
    """See the module docstring. ``writer`` is a ``influx.writer.Writer`` or a test double."""

    def __init__(
        self,
        writer: PointWriter,
        *,
        flush_interval_s: float = 5.0,
        max_queued_points: int = 100_000,
        flush_wait_s: float = 5.0,
        journal: Journal | None = None,
    ) -> None:
        self.writer = writer
        self.flush_interval_s = flush_interval_s
        self.flush_wait_s = flush_wait_s
        self.max_queued_points = max_queued_points
        self.dropped = 0
        self._queue: deque[list[Point]] = deque()
        self._queued_points = 0
        self._journal = journal
        self._unreleased: list[Path] = []
        if journal is not None:
            # What a killed agent had collected but not handed over: replayed first.
            leftovers = journal.leftover_lines()
            self._unreleased = journal.cut()
            if leftovers:
                log.info("replaying %d points journaled before a restart", len(leftovers))
                writer.write(leftovers)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reflex-writer", daemon=True)
        self._thread.start()

    def emit(self, points: list[Point]) -> None:
        with self._lock:
            if self._queued_points + len(points) > self.max_queued_points:
                self.dropped += len(points)
                return
            if self._journal is not None:
                self._journal.append(_lines(points))
            self._queue.append(points)
            self._queued_points += len(points)
            if any(point.measurement == "event" for point in points):
                self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=self.flush_wait_s + 30)
        self._drain()
        self.writer.close(self.flush_wait_s)
        self._settled()

    def _drain(self) -> None:
        with self._lock:
            # The journal is cut with the queue taken, so the cut segments hold exactly
            # what this drain hands to the writer (and what earlier ones did).
            taken, self._queue, self._queued_points = self._queue, deque(), 0
            if self._journal is not None:
                self._unreleased = self._journal.cut()
        for points in taken:
            self.writer.write(points)

    def _settled(self) -> None:
        """The writer delivered or spooled everything handed to it: the journal may go."""
        if self._journal is not None and self._unreleased:
            self._journal.release(self._unreleased)
            self._unreleased = []

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.flush_interval_s)
            self._wake.clear()
            try:
                self._drain()
                self.writer.flush(self.flush_wait_s)
                self._settled()
            except Exception:  # e.g. WriterAuthError: loud in the log, the agent keeps going
                log.exception("writing to InfluxDB failed")
                self._stop.wait(self.flush_interval_s)
