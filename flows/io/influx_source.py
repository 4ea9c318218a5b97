"""The production source: telemetry windows polled from InfluxDB with Flux range queries.

A partition is a shard of nodes (``shard_of(node, n_shards)``). Its nodes are listed from the
schema's node data in the bucket (``schema.tagValues`` of the ``node`` tag, which every
measurement, ``job_membership`` included, carries), refreshed at every poll so that a node that
joins is read from its first window. ``n_shards`` is fixed configuration, not derived from the
node count: Bytewax fixes the partitions at start and recovery keys state by partition, so a
node must stay in its shard across restarts.

Each partition emits one :class:`WindowBatch` per closed window that has data, exactly like the
simulator and line-protocol sources, so the flow is the same whatever feeds it. A window
``[start, end)`` is closed once the wall clock passes ``end + lag``: points that the collectors
batch, or stamp with a clock that runs behind, land within the lag and are read in order.

Points written later than that are late: every ``late_check_seconds`` the partition recounts
the windows it read in the last ``late_horizon_seconds`` on the server, and each point found
beyond what it read goes to the error stream as an :class:`ErrorRecord`, counted, never merged
into a closed window. (InfluxDB's cost is per series read, so the recount runs over several
windows at once rather than once a window.)

The resume state is a plain time cursor: the end of the last window the partition read.

**Foreign data.** Telegraf (``nvidia_smi``, ``infiniband``, ``net``, ``diskio``, ``pressure``) and
dcgm-exporter or node_exporter (through Telegraf's ``inputs.prometheus``, metric version 1 or 2,
or remote write) name their nodes ``host``/``Hostname``/``instance``, not ``node``. Each partition
reads every foreign point of its windows (the measurements of ``schemas/foreign/`` and any
``DCGM_FI_*``), translates those of its own nodes with its own :class:`ForeignTranslator` in
time order, exactly as the line-protocol replay and the push source do, and keeps its nodes'
points. Shard 0 translates every foreign point, so that the translator's notes (a refused
point, an ignored field once) go to the error stream from it alone, each counted once. Late
foreign points are not recounted. At its first read, shard 0
logs once which measurements of the bucket it cannot read, and why.

"The wall clock" is the flow host's, corrected by InfluxDB's when it is known to be off by more
than 2 s (``measure_server_clock``, on in production; :mod:`influx.clock_offset` reads the
``Date`` of every answer): a flow host running 30 s ahead would otherwise close every window
before its data arrived, and see every node missing. A fresh start reads nothing until one
answer has given that clock (a ``/ping`` that fails is retried like a failed query).

>>> settings = InfluxSettings(url="http://127.0.0.1:8086", token="token")
>>> source = InfluxSource(settings, n_shards=4)
>>> source.list_parts()
['shard-0', 'shard-1', 'shard-2', 'shard-3']
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import urllib3
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from influxdb_client.rest import ApiException

from reflex_localize.flows.io.sources import shard_names
from reflex_localize.flows.messages import ErrorRecord, WindowBatch, shard_of
from reflex_localize.influx.backoff import Backoff
from reflex_localize.influx.clock_offset import ClockOffset
from reflex_localize.influx.config import InfluxSettings
from reflex_localize.influx.reader import FluxQueryError, FluxReader, frames_from_csv, parse_times
from reflex_localize.influx.write_transport import observe_last_answer, probe_server_clock
from reflex_localize.schemas.codec import Point, PointError
from reflex_localize.schemas.contract import load_schema
from reflex_localize.schemas.foreign_mapping import DCGM_PREFIX, load_foreign_mapping
from reflex_localize.schemas.foreign_translate import ForeignTranslator
from reflex_localize.schemas.frame import Frame, frames_from_points

_log = logging.getLogger(__name__)

# A window of a large fleet takes seconds to read back (a poll, not a write).
QUERY_TIMEOUT_S = 30.0
LATE_REASON = "late"  # the code; the detail says: written after its window closed
# Parameters are bound (``params=``), never spliced into the text. The node set is a regular
# expression compiled on the server: unlike ``contains(set:)``, a regex filter on a tag is
# pushed down to the storage engine (measured: 0.6 s against 19 s for 128 nodes).
_NODES_FLUX = """import "influxdata/influxdb/schema"
schema.tagValues(bucket: bucket, tag: "node", start: time(v: start))
"""
_ROWS_FLUX = """import "regexp"
nodes = regexp.compile(v: pattern)
from(bucket: bucket)
  |> range(start: time(v: start), stop: time(v: stop))
  |> filter(fn: (r) => r.node =~ nodes and r._measurement !~ /^reflex_/)
  |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")
"""
# Field values per window. Counting per series first keeps int and float values apart.
_COUNT_FLUX = """import "regexp"
nodes = regexp.compile(v: pattern)
from(bucket: bucket)
  |> range(start: time(v: start), stop: time(v: stop))
  |> filter(fn: (r) => r.node =~ nodes and r._measurement !~ /^reflex_/)
  |> aggregateWindow(every: duration(v: every), fn: count, createEmpty: false, timeSrc: "_start")
  |> group()
  |> aggregateWindow(every: duration(v: every), fn: sum, createEmpty: false, timeSrc: "_start")
"""
# Foreign points, whatever their tags: each partition translates them all and keeps its nodes'.
_FOREIGN_FLUX = """import "regexp"
names = regexp.compile(v: foreign)
from(bucket: bucket)
  |> range(start: time(v: start), stop: time(v: stop))
  |> filter(fn: (r) => r._measurement =~ names)
  |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")
"""
_MEASUREMENTS_FLUX = """import "influxdata/influxdb/schema"
schema.measurements(bucket: bucket, start: time(v: start))
"""
_REGEX_SPECIALS = frozenset("\\.+*?()|[]{}^$")


class InfluxSourceError(RuntimeError):
    """InfluxDB refuses the source's configuration (token, org, bucket); retrying cannot help."""


@dataclass
class SourceStats:
    """Per partition: what the source read, and what it could not place."""

    queries: int = 0
    rows: int = 0
    windows: int = 0
    late_points: int = 0
    failed_queries: int = 0
    query_seconds: float = 0.0
    foreign_points: int = 0  # foreign points read (every shard reads them all)


class ClockProbeError(Exception):
    """No answer to the ``/ping`` that reads InfluxDB's clock before the first window."""

    def __init__(self, url: str) -> None:
        super().__init__(f"no answer from {url}/ping to read the server's clock")


class InfluxSource(FixedPartitionedSource[WindowBatch, int]):
    """Polls closed windows of telemetry out of InfluxDB, one partition per shard of nodes.

    ``start_ns`` is where a fresh start (no resume state) begins; by default the window that
    is open now, so a new deployment does not replay the bucket's history. With ``stop_ns``
    the source ends there: a replay of a past incident out of InfluxDB.

    A query covers ``max_windows_per_query`` closed windows; over a stretch where a shard
    reads nothing, the span doubles each read up to ``max_empty_windows_per_query`` (the most
    one query may then bring back, once, where the data begins).
    """

    def __init__(
        self,
        settings: InfluxSettings,
        *,
        n_shards: int = 4,
        window_seconds: float = 10.0,
        lag_seconds: float = 5.0,
        start_ns: int | None = None,
        stop_ns: int | None = None,
        max_windows_per_query: int = 6,
        max_empty_windows_per_query: int = 48,
        late_horizon_seconds: float = 60.0,
        late_check_seconds: float = 30.0,
        clock: Callable[[], int] = time.time_ns,
        measure_server_clock: bool = False,
        clock_probe_timeout_s: float = 2.0,
    ) -> None:
        if n_shards < 1 or window_seconds <= 0 or lag_seconds < 0:
            raise ValueError("need n_shards >= 1, window_seconds > 0, lag_seconds >= 0")
        self.settings, self.n_shards = settings, n_shards
        self.window_ns, self.lag_ns = int(window_seconds * 1e9), int(lag_seconds * 1e9)
        self.start_ns, self.stop_ns = start_ns, stop_ns
        self.max_windows = max(1, max_windows_per_query)
        self.max_empty_windows = max(self.max_windows, max_empty_windows_per_query)
        self.late_horizon_ns, self.clock = int(late_horizon_seconds * 1e9), clock
        self.late_check_ns = int(late_check_seconds * 1e9)
        self.clock_offset = ClockOffset(wall=clock) if measure_server_clock else None
        self.clock_probe_timeout_s = clock_probe_timeout_s

    def now_ns(self) -> int:
        """The wall clock, corrected to InfluxDB's when it is known to be off."""
        return self.clock() + self._correction_ns()

    def local_ns(self, server_ns: int) -> int:
        """A time by InfluxDB's clock as this host's clock reads it (Bytewax wakes by that)."""
        return server_ns - self._correction_ns()

    def _correction_ns(self) -> int:
        return self.clock_offset.correction_ns() if self.clock_offset is not None else 0

    def list_parts(self) -> list[str]:
        return shard_names(self.n_shards)

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> InfluxPartition:
        if resume_state is None:
            start = self.start_ns if self.start_ns is not None else self.now_ns() - self.lag_ns
            resume_state = start // self.window_ns * self.window_ns
        return InfluxPartition(self, for_part, resume_state)


class InfluxPartition(StatefulSourcePartition[WindowBatch, int]):
    """One shard's reader. Its cursor is the end of the last window it read (ns)."""

    def __init__(
        self,
        source: InfluxSource,
        shard: str,
        cursor_ns: int,
        translator: ForeignTranslator | None = None,
    ) -> None:
        self._source, self._shard = source, shard
        # Its memory (last XID, counters) follows the stream: the push source hands in its own.
        self._foreign = translator or ForeignTranslator()
        self._told_unreadable = False
        self._index = int(shard.rsplit("-", 1)[1])
        self._cursor = cursor_ns
        self._reader = FluxReader(source.settings)
        self._client = self._reader.client
        self._backoff = Backoff(initial_s=1.0, max_s=30.0)
        self._span = source.max_windows  # windows the next query covers
        self._awake: datetime | None = None
        self._pattern = ""
        self._emitted: dict[int, tuple[int, int]] = {}  # window -> (rows, field values) read
        self._late: list[ErrorRecord] = []
        self._checked_at = cursor_ns  # the cursor at the last recount
        self.stats = SourceStats()

    # ---- the Bytewax partition ------------------------------------------------------------

    def next_batch(self) -> list[WindowBatch]:
        src = self._source
        if src.stop_ns is not None and self._cursor >= src.stop_ns:
            raise StopIteration  # a replay that is done needs no server, nor its clock
        if self._server_clock_unread():
            return self._retry_later(ClockProbeError(src.settings.url))
        now = src.now_ns()
        closed_until = (now - src.lag_ns) // src.window_ns * src.window_ns
        if src.stop_ns is not None:
            closed_until = min(closed_until, -(-src.stop_ns // src.window_ns) * src.window_ns)
        if self._cursor >= closed_until or not self._backoff.ready():
            self._awake = _at(src.local_ns(self._wake_ns(now)))
            return []
        stop = min(closed_until, self._cursor + self._span * src.window_ns)
        try:
            batches = self._read(self._cursor, stop)
        except ApiException as error:
            if error.status in (400, 401, 403, 404):  # our query or config: retrying cannot help
                raise InfluxSourceError(
                    f"InfluxDB at {src.settings.url} refused the source's query on bucket "
                    f"{src.settings.bucket!r}: HTTP {error.status} {error.reason}"
                ) from None
            return self._retry_later(error)
        except (OSError, urllib3.exceptions.HTTPError) as error:
            # Refused, reset, timed out, cut mid-answer: urllib3's connection errors are not
            # OSErrors (NewConnectionError, ProtocolError, ReadTimeoutError), and a source that
            # let them through died with the server and never saw it come back.
            return self._retry_later(error)
        except FluxQueryError as error:
            raise InfluxSourceError(f"InfluxDB at {src.settings.url}: {error}") from None
        self._backoff.succeeded()
        self._cursor = stop
        # Catching up over time with nothing of this shard's (a replay of the last day, a job
        # that started late in it), each query costs the server about the same however long
        # its range: the span doubles while reads come back empty, and is the configured one
        # again as soon as data does. Four queries a step, each 0.25 s, over an hour of
        # empty windows took a minute of a refit.
        found = any(batch.frames for batch in batches)
        self._span = src.max_windows if found else min(2 * self._span, src.max_empty_windows)
        # Still behind: poll again at once. Caught up: sleep until the next window closes.
        self._awake = None if stop < closed_until else _at(src.local_ns(self._wake_ns(now)))
        return batches

    def _server_clock_unread(self) -> bool:
        """True while a fresh start has no answer yet that gives InfluxDB's clock.

        A fresh start must not close windows early, so nothing is read until then: a probe
        that timed out on a busy server, then a read by a host clock 30 s ahead, took a window
        whose data was still coming (CI). Short, and retried with the queries' backoff, count
        and warning; an answer without a ``Date`` leaves the host's own clock in charge.
        """
        offset = self._source.clock_offset
        if offset is None or offset.estimate() is not None or not self._backoff.ready():
            return False
        return not probe_server_clock(self._client, offset, self._source.clock_probe_timeout_s)

    def next_awake(self) -> datetime | None:
        return self._awake

    def snapshot(self) -> int:
        return self._cursor

    def close(self) -> None:
        self._reader.close()

    # ---- reading --------------------------------------------------------------------------

    def _read(self, start: int, stop: int) -> list[WindowBatch]:
        src = self._source
        if not self._told_unreadable:
            self._tell_unreadable(start)
        self._pattern = self._node_pattern(start)
        self._check_late(start)
        by_window: dict[int, list[Frame]] = {}
        counts: dict[int, tuple[int, int]] = {}
        if self._pattern:
            for frame in self._frames(start, stop):
                for window, part in _split_windows(frame, src.window_ns):
                    by_window.setdefault(window, []).append(part)
                    rows, values = counts.get(window, (0, 0))
                    counts[window] = (rows + len(part), values + len(part) * len(part.fields))
        for frame in self._foreign_frames(start, stop):
            for window, part in _split_windows(frame, src.window_ns):
                by_window.setdefault(window, []).append(part)
        for window in range(start // src.window_ns, stop // src.window_ns):
            self._emitted[window] = counts.get(window, (0, 0))
        batches = [
            WindowBatch(
                self._shard,
                w,
                w * src.window_ns,
                (w + 1) * src.window_ns,
                frames,
                n_shards=src.n_shards,
            )
            for w, frames in sorted(by_window.items())
        ]
        if self._late:
            if not batches:  # late points travel on their own when no window has data
                last = stop // src.window_ns - 1
                batches = [
                    WindowBatch(
                        self._shard,
                        last,
                        last * src.window_ns,
                        stop,
                        [],
                        errors=self._late,
                        n_shards=src.n_shards,
                    )
                ]
            else:
                batches[0].errors = self._late
            self._late = []
        self.stats.windows += len(batches)
        return batches

    def _node_pattern(self, start: int) -> str:
        """An anchored regex of this shard's nodes that have data since ``start``."""
        rows = self._csv(_NODES_FLUX, {"start": start - self._source.late_horizon_ns})
        nodes = sorted(
            {
                row[-1]
                for row in rows
                if len(row) > 3
                and row[0] == ""
                and row[1] != "result"
                and shard_of(row[-1], self._source.n_shards) == self._index
            }
        )
        if not nodes:
            return ""
        return "^(?:" + "|".join(_regex_literal(node) for node in nodes) + ")$"

    def _frames(self, start: int, stop: int) -> Iterator[Frame]:
        rows = self._csv(_ROWS_FLUX, {"start": start, "stop": stop, "pattern": self._pattern})
        for frame in frames_from_csv(rows):
            self.stats.rows += len(frame)
            yield frame

    def _foreign_frames(self, start: int, stop: int) -> list[Frame]:
        """This shard's Reflex points translated from the foreign points of ``[start, stop)``;
        the translator's notes join the late records (shard 0 only: every shard reads them)."""
        params = {"start": start, "stop": stop, "foreign": _foreign_pattern()}
        points = [
            _present(point)
            for frame in frames_from_csv(self._csv(_FOREIGN_FLUX, params))
            for point in frame.points()
        ]
        points.sort(key=lambda point: point.time_ns)  # a series at a time: memory follows time
        self.stats.foreign_points += len(points)
        n_shards = self._source.n_shards
        if self._index != 0:  # shard 0 translates every point: the notes are counted there once
            points = [p for p in points if self._owns_foreign(p, n_shards)]
        mine: list[Point] = []
        for point in points:
            try:
                translated, notes = self._foreign.translate(point)
            except PointError as error:
                translated, notes = [], []
                if self._index == 0:
                    self._late.append(ErrorRecord("source", error.code, str(error)[:300]))
            if self._index == 0:
                self._late += [ErrorRecord(n.where, n.code, n.detail) for n in notes]
            mine += [p for p in translated if shard_of(p.tags["node"], n_shards) == self._index]
        return frames_from_points(mine) if mine else []

    def _owns_foreign(self, point: Point, n_shards: int) -> bool:
        """Whether a foreign point may translate to this shard's node; a point whose node is
        not known before translating is kept (translation decides)."""
        node = self._foreign.node_of(point)
        return node is None or shard_of(node, n_shards) == self._index

    def _tell_unreadable(self, start: int) -> None:
        """Logs once (shard 0) the bucket's measurements this source cannot read, and why."""
        if self._index != 0:
            self._told_unreadable = True
            return
        since = start - max(self._source.late_horizon_ns, 3600 * 10**9)
        rows = self._csv(_MEASUREMENTS_FLUX, {"start": since})
        found = {row[-1] for row in rows if len(row) > 3 and row[0] == "" and row[1] != "result"}
        self._told_unreadable = True  # once answered: a failed query is retried with the read
        unreadable = sorted(name for name in found if not _readable(name))
        if unreadable:
            _log.warning(
                "influx source: %d measurement(s) in bucket %r are neither Reflex's "
                "(schemas/measurements.csv) nor in a foreign table (schemas/foreign/), and are "
                "not read: %s",
                len(unreadable),
                self._source.settings.bucket,
                ", ".join(unreadable[:20]) + (", ..." if len(unreadable) > 20 else ""),
            )

    def _check_late(self, start: int) -> None:
        """Recounts recently read windows; what the server has beyond that arrived late."""
        src = self._source
        horizon = (start - src.late_horizon_ns) // src.window_ns
        for window in [w for w in self._emitted if w < horizon]:
            del self._emitted[window]
        if not self._emitted or not self._pattern or start - self._checked_at < src.late_check_ns:
            return
        self._checked_at = start
        first = min(self._emitted)
        params = {
            "start": first * src.window_ns,
            "stop": start,
            "every": src.window_ns,
            "pattern": self._pattern,
        }
        for window, values in _window_counts(self._csv(_COUNT_FLUX, params), src.window_ns):
            rows_read, values_read = self._emitted.get(window, (0, values))
            if values <= values_read:
                continue
            rows_now = self._count_rows(window)
            late = max(rows_now - rows_read, 1)
            self._emitted[window] = (max(rows_now, rows_read), values)
            self.stats.late_points += late
            detail = f"{self._shard} window {window}: written after it closed (past the lag)"
            self._late.extend(ErrorRecord("source", LATE_REASON, detail) for _ in range(late))

    def _count_rows(self, window: int) -> int:
        w = self._source.window_ns
        rows = self._csv(
            _ROWS_FLUX, {"start": window * w, "stop": (window + 1) * w, "pattern": self._pattern}
        )
        return sum(len(frame) for frame in frames_from_csv(rows))

    def _csv(self, flux: str, params: dict[str, object]) -> Iterator[list[str]]:
        began = time.monotonic()
        self.stats.queries += 1
        try:
            sent_ns = self._source.clock()
            rows = self._reader.csv(flux, {"bucket": self._source.settings.bucket, **params})
            if self._source.clock_offset is not None:  # the headers are in; the body streams
                observe_last_answer(self._client, self._source.clock_offset, sent_ns)
            yield from rows
        finally:
            self.stats.query_seconds += time.monotonic() - began

    def _retry_later(self, error: Exception) -> list[WindowBatch]:
        self.stats.failed_queries += 1
        delay = self._backoff.failed()
        _log.warning(
            "%s: InfluxDB query failed (%s: %s); retrying in %.1f s",
            self._shard,
            type(error).__name__,
            str(error)[:200],
            delay,
        )
        self._awake = _at(self._source.clock() + int(delay * 1e9))
        return []

    def _wake_ns(self, now: int) -> int:
        src = self._source
        next_close = self._cursor + src.window_ns + src.lag_ns
        return max(next_close, now + int(self._backoff.wait_s() * 1e9))


def _window_counts(rows: Iterable[list[str]], window_ns: int) -> Iterator[tuple[int, int]]:
    header: list[str] = []
    for row in rows:
        if not row or row[0].startswith("#"):
            continue
        if not header:
            header = row
            continue
        record = dict(zip(header, row, strict=True))
        start = int(parse_times((record["_time"],))[0])
        yield start // window_ns, int(record["_value"])


def _split_windows(frame: Frame, window_ns: int) -> Iterator[tuple[int, Frame]]:
    windows = frame.time_ns // window_ns
    if windows.min() == windows.max():
        yield int(windows[0]), frame
        return
    for window in np.unique(windows).tolist():
        yield window, frame.take(windows == window)


def _foreign_pattern() -> str:
    """An anchored regex of the foreign measurements, any ``DCGM_FI_*`` metric included."""
    names = sorted(load_foreign_mapping().names() - {DCGM_PREFIX})
    alternatives = [_regex_literal(name) for name in names] + [_regex_literal(DCGM_PREFIX) + ".*"]
    return "^(?:" + "|".join(alternatives) + ")$"


def _readable(measurement: str) -> bool:
    """Whether a measurement is Reflex's (its telemetry, its own outputs) or a foreign one."""
    own = measurement.startswith("reflex_") or measurement in load_schema().measurements
    return own or measurement in load_foreign_mapping().names()


def _present(point: Point) -> Point:
    """A point without the tags a Flux table leaves empty (another series' tag columns)."""
    tags = {name: value for name, value in point.tags.items() if value}
    return Point(point.measurement, tags, point.fields, point.time_ns)


def _regex_literal(text: str) -> str:
    return "".join("\\" + c if c in _REGEX_SPECIALS else c for c in text)


def _at(time_ns: int) -> datetime:
    return datetime.fromtimestamp(time_ns / 1e9, tz=UTC)
