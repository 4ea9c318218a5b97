"""The one writer of telemetry and results into InfluxDB: batched, checked, and losing nothing.

Every point is validated against ``schemas/`` first; a bad one is counted by reason and logged,
never raised to the caller and never sent. Good points go out in gzip'd batches. The answers
are sorted the way telegraf's ``outputs/influxdb_v2/http.go`` sorts them:

- 2xx: delivered;
- 401/403: :class:`WriterAuthError`, loudly (a 404 for the org or bucket:
  :class:`WriterConfigError`); the batch stays queued or spooled, it is not lost;
- 413: the batch is split in halves until each half fits;
- other 4xx (bad data): the batch is halved until the bad lines are alone, then those are
  dropped and counted with the server's reason; the good lines around them still land;
- 429, 5xx, timeouts, refused connections: exponential backoff with jitter, never sooner
  than Retry-After.

While InfluxDB cannot take data, sealed batches wait in memory up to ``max_buffer_points`` and
the oldest spill to an fsync'd on-disk :class:`~influx.spool.Spool`. The spool is replayed
first, in order, as soon as InfluxDB answers again, including by a new Writer started on the
same ``spool_dir`` after a crash. Replays and ambiguous failures may send a point twice;
InfluxDB keeps one point per series and timestamp, so it is stored once.

Memory is bounded by ``max_buffer_points`` lines plus one spool segment. When the spool would
outgrow ``max_spool_bytes``, its oldest segment is dropped, counted in
``stats.dropped_spool_full`` and logged as an error: the newest data matters most.

A Writer is safe to share between threads; each call holds a lock while it works.

Given a :class:`~influx.clock_offset.ClockOffset`, every answer's ``Date`` header feeds it:
that is how the agent learns how far its node's clock is from the server's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from reflex_localize.influx.backoff import Backoff
from reflex_localize.influx.clock_offset import ClockOffset
from reflex_localize.influx.config import InfluxSettings
from reflex_localize.influx.spool import Segment, Spool
from reflex_localize.influx.write_transport import InfluxWriteTransport, SendResult, WriteTransport
from reflex_localize.schemas.codec import Point, PointError, decode, encode
from reflex_localize.schemas.contract import Schema, load_schema
from reflex_localize.schemas.frame import Frame, validate_frame
from reflex_localize.schemas.frame_codec import encode_frame

_log = logging.getLogger(__name__)
_MAX_REASONS = 200  # distinct rejection reasons kept; more are lumped together
_OTHER_REASONS = "other reasons (too many distinct ones to keep)"
_REQUESTS_PER_WRITE = 4  # write() catches up with a spool backlog a few requests at a time


class WriterError(RuntimeError):
    """InfluxDB refuses this writer's configuration; retrying cannot help."""


class WriterAuthError(WriterError):
    """401/403: the token is wrong or may not write to the bucket."""


class WriterConfigError(WriterError):
    """404: the org or bucket does not exist."""


@dataclass
class WriterStats:
    """What happened to every point handed to the writer.

    ``sent`` counts points InfluxDB acknowledged (a point resent after an ambiguous failure
    counts again); ``spooled`` points written to disk; ``replayed`` points delivered from the
    spool; ``retried`` requests that failed and will be retried.
    """

    sent: int = 0
    rejected_by_reason: dict[str, int] = field(default_factory=dict)
    spooled: int = 0
    replayed: int = 0
    retried: int = 0
    dropped_spool_full: int = 0

    @property
    def rejected(self) -> int:
        return sum(self.rejected_by_reason.values())


class Writer:
    """Writes points to one bucket; see the module docstring for what happens on failure.

    >>> from reflex_localize.schemas.codec import Point
    >>> with Writer(url, token, "reflex", "telemetry", spool_dir) as writer:  # doctest: +SKIP
    ...     writer.write([Point("host", {"cluster": "c", "node": "n1"}, {"load1": 0.5}, 1)])
    ...     writer.write(["host,cluster=c,node=n1 load1=nan 2"])  # counted, not raised
    >>> writer.stats.sent, writer.stats.rejected  # doctest: +SKIP
    (1, 1)
    """

    def __init__(
        self,
        url: str,
        token: str,
        org: str,
        bucket: str,
        spool_dir: Path,
        *,
        batch_size: int = 5000,
        max_buffer_points: int = 50_000,
        max_spool_bytes: int = 1 << 30,
        timeout_s: float = 10.0,
        verify_ssl: bool = True,
        ssl_ca_cert: str | None = None,
        clock_offset: ClockOffset | None = None,
        transport: WriteTransport | None = None,
        schema: Schema | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if batch_size < 1 or max_buffer_points < batch_size:
            raise ValueError("need 1 <= batch_size <= max_buffer_points")
        self.url, self.bucket = url, bucket
        self.batch_size, self.max_buffer_points = batch_size, max_buffer_points
        self.stats = WriterStats()
        # The spool first: it is what can refuse (another writer holds it), so nothing leaks.
        self._spool = Spool(
            Path(spool_dir), max_bytes=max_spool_bytes, segment_bytes=min(4 << 20, max_spool_bytes)
        )
        self._transport = transport or InfluxWriteTransport(
            url,
            token,
            org,
            bucket,
            timeout_s=timeout_s,
            verify_ssl=verify_ssl,
            ssl_ca_cert=ssl_ca_cert,
            clock_offset=clock_offset,
        )
        self._schema = schema or load_schema()
        self._clock, self._sleep = clock, sleep
        self._backoff = Backoff(clock=clock)
        self._replaying: tuple[Path, int] | None = None  # spool segment and lines delivered
        self._buffer: list[str] = []  # the batch being filled
        self._pending: deque[list[str]] = deque()  # sealed batches, oldest first, newer than spool
        self._pending_points = 0
        self._lock = threading.RLock()
        self._closed = False

    @classmethod
    def from_settings(cls, settings: InfluxSettings, spool_dir: Path, **options: Any) -> Writer:
        """A writer to the settings' bucket; ``options`` are the constructor's keywords."""
        return cls(
            settings.url,
            settings.token,
            settings.org,
            settings.bucket,
            spool_dir,
            batch_size=settings.batch_size,
            timeout_s=settings.timeout_s,
            verify_ssl=settings.verify_ssl,
            ssl_ca_cert=settings.ssl_ca_cert or None,
            **options,
        )

    def __repr__(self) -> str:
        return f"Writer(url={self.url!r}, bucket={self.bucket!r})"

    @property
    def backlog(self) -> int:
        """Points accepted but not yet delivered that are held in memory (the spool aside)."""
        return len(self._buffer) + self._pending_points

    @property
    def spool_empty(self) -> bool:
        return self._spool.empty

    def write(self, points: Iterable[Point | str]) -> None:
        """Queues points (Points or line-protocol lines); sends whole batches as they fill."""
        with self._lock:
            self._check_open()
            validated = (self._validated_line(item) for item in points)
            self._queue(line for line in validated if line is not None)

    def write_frames(self, frames: Iterable[Frame]) -> None:
        """Queues every row of each frame, as :meth:`write` queues points: rows that break
        the schema are counted by reason, the rest encoded column by column."""
        with self._lock:
            self._check_open()
            for frame in frames:
                good, bad = validate_frame(frame, self._schema)
                for _, error in bad:
                    self._reject(str(error))
                try:
                    lines = encode_frame(good)
                except PointError:
                    # A value line protocol cannot carry: point by point, so that only the
                    # rows holding it are refused.
                    self.write(good.points())
                    continue
                self._queue(lines)

    def probe_clock(self, timeout_s: float = 2.0) -> bool:
        """Measures the server's clock now (see :mod:`influx.clock_offset`), so that even the
        first points are stamped right; False when it cannot (no offset, no answer)."""
        probe = getattr(self._transport, "probe_clock", None)
        return bool(probe(timeout_s)) if probe is not None else False

    def flush(self, wait_s: float = 30.0) -> bool:
        """Sends everything now, retrying for up to ``wait_s``; what is still undelivered
        then goes to the spool. Returns True when nothing is left undelivered."""
        with self._lock:
            self._check_open()
            self._seal()
            try:
                self._pump(deadline=self._clock() + wait_s, max_requests=None)
            finally:
                self._spill(everything=True)
            return self._spool.empty

    def close(self, wait_s: float = 30.0) -> bool:
        """Flushes (see :meth:`flush`) and releases the connection and the spool."""
        with self._lock:
            if self._closed:
                return self._spool.empty
            try:
                delivered = self.flush(wait_s)
                if not delivered:
                    _log.warning(
                        "closing with InfluxDB at %s unreachable: %d bytes stay in spool %s",
                        self.url,
                        self._spool.size_bytes,
                        self._spool.directory,
                    )
                return delivered
            finally:
                self._closed = True
                self._transport.close()
                self._spool.close()

    def __enter__(self) -> Writer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    # ---- validation -----------------------------------------------------------------------

    def _validated_line(self, item: Point | str) -> str | None:
        try:
            if isinstance(item, Point):
                return encode(item, self._schema)
            if isinstance(item, str):
                return self._validated_text(item)
            raise PointError(f"expected a Point or a line of line protocol, got {type(item)}")
        except PointError as error:
            self._reject(str(error))
        return None

    def _validated_text(self, line: str) -> str:
        try:
            # Re-encoding gives one canonical spelling, whatever the producer wrote.
            return encode(decode(line, self._schema), self._schema)
        except PointError:
            raise
        except Exception as error:  # the parser's own slip on garbage must not reach the caller
            raise PointError(f"unparseable line ({type(error).__name__})") from None

    def _reject(self, reason: str, count: int = 1) -> None:
        reasons = self.stats.rejected_by_reason
        if reason not in reasons and len(reasons) >= _MAX_REASONS:
            reason = _OTHER_REASONS
        first = reason not in reasons
        reasons[reason] = reasons.get(reason, 0) + count
        # The first point of each reason is logged loudly; repeats would flood the log.
        _log.log(logging.WARNING if first else logging.DEBUG, "rejected point: %s", reason)

    # ---- delivery -------------------------------------------------------------------------

    def _queue(self, lines: Iterable[str]) -> None:
        for line in lines:
            self._buffer.append(line)
            if len(self._buffer) >= self.batch_size:
                self._seal()
                self._pump(deadline=None, max_requests=_REQUESTS_PER_WRITE)

    def _seal(self) -> None:
        if self._buffer:
            self._pending.append(self._buffer)
            self._pending_points += len(self._buffer)
            self._buffer = []

    def _pump(self, deadline: float | None, max_requests: int | None) -> None:
        """Delivers the spool, then pending batches, in order, until done, out of requests,
        or backing off past the deadline; then keeps memory within bounds."""
        try:
            requests = 0
            while (not self._spool.empty or self._pending) and (
                max_requests is None or requests < max_requests
            ):
                if not self._backoff.ready():
                    wait = self._backoff.wait_s()
                    if deadline is None or self._clock() + wait > deadline:
                        break
                    self._sleep(wait)
                requests += 1
                self._deliver_next()  # on failure the backoff decides when to try again
        except BaseException:
            # A loud failure (a refused token, a missing bucket) must not take the queued
            # points with it if the process then dies: they wait on disk for a fixed config.
            self._spill(everything=True)
            raise
        self._spill(everything=False)

    def _deliver_next(self) -> bool:
        """One step: a chunk of the oldest spool segment, else the oldest pending batch."""
        if not self._spool.empty:
            segment = self._spool.oldest()
            assert segment is not None
            return self._deliver_segment_chunk(segment)
        batch = self._pending[0]
        if not self._deliver(batch):
            return False
        self._pending.popleft()
        self._pending_points -= len(batch)
        return True

    def _deliver_segment_chunk(self, segment: Segment) -> bool:
        done = self._replaying[1] if self._replaying and self._replaying[0] == segment.path else 0
        chunk = segment.lines[done : done + self.batch_size]
        if chunk and not self._deliver(chunk):
            return False
        self.stats.replayed += len(chunk)
        done += len(chunk)
        if done >= len(segment.lines):
            self._spool.remove(segment)
            self._replaying = None
        else:
            self._replaying = (segment.path, done)
        return True

    def _deliver(self, lines: list[str]) -> bool:
        """Sends lines; True when they are settled (stored, or rejected and counted)."""
        result = self._transport.send("\n".join(lines).encode())
        if result.ok:
            self.stats.sent += len(lines)
            self._backoff.succeeded()
            return True
        status = result.status
        if status in (401, 403):
            raise WriterAuthError(
                f"InfluxDB at {self.url} refused the token for bucket {self.bucket!r}: "
                f"HTTP {status} {result.message}"
            )
        if status == 404:
            raise WriterConfigError(f"InfluxDB at {self.url}: HTTP 404 {result.message}")
        if status == 429 or status >= 500 or status < 400:
            return self._retry_later(result, len(lines))
        # 413 (too large) and other 4xx (bad data): halve until the culprit stands alone.
        if len(lines) == 1:
            self._reject(f"HTTP {status}: {result.message}")
            return True
        middle = len(lines) // 2
        return self._deliver(lines[:middle]) and self._deliver(lines[middle:])

    def _retry_later(self, result: SendResult, points: int) -> bool:
        self.stats.retried += 1
        delay = self._backoff.failed(result.retry_after_s)
        level = logging.WARNING if self._backoff.failures == 1 else logging.DEBUG
        _log.log(
            level,
            "InfluxDB at %s did not take %d points (%s %s); retrying in %.1f s",
            self.url,
            points,
            result.status or "no response",
            result.message,
            delay,
        )
        return False

    def _spill(self, *, everything: bool) -> None:
        """Moves the oldest pending batches to the spool: all of them, or enough to keep
        memory within max_buffer_points (counting room for the batch being filled)."""
        if everything:
            self._seal()
        room = self.max_buffer_points - self.batch_size
        while self._pending and (everything or self._pending_points > room):
            batch = self._pending.popleft()
            self._pending_points -= len(batch)
            self.stats.dropped_spool_full += self._spool.append(batch)
            self.stats.spooled += len(batch)

    def _check_open(self) -> None:
        if self._closed:
            raise WriterError("this writer is closed")
