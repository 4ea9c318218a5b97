"""Where the agent's points go: stdout as line protocol, or InfluxDB through the Writer.

:class:`WriterSink` keeps network time off the collection loop: ``emit`` only appends to a
bounded queue, and a thread of its own hands batches to ``reflex.writer.Writer`` and flushes
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
from typing import Any, Protocol, TextIO

from schemas.codec import Point, encode_many

log = logging.getLogger(__name__)


class PointWriter(Protocol):
    def write(self, points: Any) -> None: ...
    def flush(self, wait_s: float = ...) -> bool: ...
    def close(self, wait_s: float = ...) -> bool: ...


class StdoutSink:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self._lock = threading.Lock()

    def emit(self, points: list[Point]) -> None:
        text = encode_many(points)
        with self._lock:
            self.stream.write(text)
            self.stream.flush()

    def close(self) -> None:
        pass


class WriterSink:
    """See the module docstring. ``writer`` is a ``reflex.writer.Writer`` or a test double."""

    def __init__(
        self,
        writer: PointWriter,
        *,
        flush_interval_s: float = 5.0,
        max_queued_points: int = 100_000,
        flush_wait_s: float = 5.0,
    ) -> None:
        self.writer = writer
        self.flush_interval_s = flush_interval_s
        self.flush_wait_s = flush_wait_s
        self.max_queued_points = max_queued_points
        self.dropped = 0
        self._queue: deque[list[Point]] = deque()
        self._queued_points = 0
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

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    return
                points = self._queue.popleft()
                self._queued_points -= len(points)
            self.writer.write(points)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.flush_interval_s)
            self._wake.clear()
            try:
                self._drain()
                self.writer.flush(self.flush_wait_s)
            except Exception:  # e.g. WriterAuthError: loud in the log, the agent keeps going
                log.exception("writing to InfluxDB failed")
                self._stop.wait(self.flush_interval_s)
