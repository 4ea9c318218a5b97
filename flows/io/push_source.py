"""The live source fed by InfluxDB itself: a replication stream pushes every write to the
flow (:mod:`flows.push_receiver`), and Flux reads back only what the push cannot give.

**Durability: InfluxDB is the system of record.** InfluxDB enqueues a write for replication
only after storing it, so every line that reaches the receiver is already in the bucket. The
receiver answers ``204`` as soon as the lines sit in the partition's pending windows, in
memory; a crash loses them from memory only. The resume state is the end of the last window
the partition emitted (as for :class:`~flows.influx_source.InfluxSource`). From that cursor,
every window is read back with Flux once it closes, through the polling source's own reader,
until the stream is *live*: a request carries a line for a window not yet closed or the one
just closed, so InfluxDB's queue (first in, first out) has drained to about now. The push then
gives every window from ``push_from`` on: the window that closes next, and no earlier than
the first window after ``T0 + lag`` for a partition built at clock time ``T0``, fresh or
restarted (what a crashed run answered for, or what was written before the stream existed,
is in the bucket only, written before ``T0``, stamped before ``T0 + lag``).
Lines pushed for earlier windows, the queue's redeliveries above all, are counted as
``covered`` and dropped undecoded: Flux reads them from the bucket. So a window comes either
from Flux or from the push, never from both, and nothing is counted twice. (After a long
outage InfluxDB retries the stream with a backoff of up to 15 minutes; meanwhile the flow
polls, as the polling source does.)

**Gaps.** The same rule covers a flow that was down longer than InfluxDB's queue holds
(``maxQueueSizeBytes`` or ``maxAgeSeconds`` passed, or the stream re-created): whatever the
queue dropped lies before ``push_from`` and is read from the bucket, a bounded backfill of
``max_windows_per_query`` windows per step, after which the push stream takes over.
With several InfluxDB instances (``backfill_from``, each replicating its rack groups' nodes to
the flow), the backfill reads every one for each window (:mod:`flows.io.influx_instances`).

**Windows** close by this host's clock, ``lag`` seconds after their end, like the polling
source. A line for a window already closed is ``late`` in the error stream; a line repeated
(the stream retries a batch whose answer it did not get) is counted once. Lines are routed to
their shard off their raw tags (:func:`flows.sources.line_owner`) and decoded only by the
shard that owns them, at window close, in sorted order, so a window's frames do not depend on
how the stream cut its batches. A line whose node cannot be read raw is decoded by every shard
and its reject counted by shard 0 alone.

Each process of a flow runs one receiver shared by its partitions, and keeps the lines of its
own shards; a flow of N processes takes N replication streams, one to each process.

>>> settings = InfluxSettings(url="http://127.0.0.1:8086", token="token")
>>> PushSource(settings, push_token="push", n_shards=2).list_parts()
['shard-0', 'shard-1']
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

from reflex_localize.flows.io.influx_instances import InstancesPartition
from reflex_localize.flows.io.influx_source import InfluxPartition, InfluxSource
from reflex_localize.flows.io.push_receiver import DEFAULT_MAX_BODY_BYTES, PushReceiver
from reflex_localize.flows.io.sources import line_owner, select_shard, shard_names
from reflex_localize.flows.messages import ErrorRecord, WindowBatch
from reflex_localize.influx.config import InfluxSettings
from reflex_localize.schemas.codec import Point, PointError
from reflex_localize.schemas.contract import load_schema
from reflex_localize.schemas.foreign_translate import ForeignTranslator
from reflex_localize.schemas.frame import Frame
from reflex_localize.schemas.line_decoder import FramePart, assemble, decode_block, points_parts
from reflex_localize.schemas.line_file import line_stamp

_log = logging.getLogger(__name__)
LATE_REASON = "late"
# Windows read by Flux without the stream taking over, after which the operator is told.
_NOT_LIVE_WARNING_WINDOWS = 30
# Closed windows whose lines are remembered (as hashes), so a batch the stream sends again is
# a duplicate, not late.
_REMEMBERED_WINDOWS = 6


@dataclass
class PushStats:
    """Per partition: what the push gave, what Flux gave, what was dropped and why."""

    lines: int = 0  # taken into a pending window
    covered: int = 0  # for a window Flux reads (before push_from): dropped undecoded
    duplicates: int = 0
    late: int = 0
    rejected: int = 0  # in the error stream: malformed, no plain stamp
    windows: int = 0
    backfill_windows: int = 0


class PushSource(FixedPartitionedSource[WindowBatch, int]):
    """Telemetry pushed by an InfluxDB replication stream, one partition per shard of nodes.

    ``settings`` reach the replicated bucket for the backfill (a read token), or
    ``backfill_from`` does, one per InfluxDB instance that replicates to the flow;
    ``push_token`` is what the stream must present. ``start_ns``: a fresh start's first
    window (default: the open one); ``stop_ns``: where the source ends (tests, benchmarks).
    ``clock`` closes the windows; ``clock_speed`` is how fast it runs against this host's
    (a replay through InfluxDB faster than real time), so that Bytewax is woken in time.
    """

    def __init__(
        self,
        settings: InfluxSettings,
        *,
        push_token: str,
        host: str = "127.0.0.1",
        port: int = 8087,
        n_shards: int = 4,
        window_seconds: float = 10.0,
        lag_seconds: float = 5.0,
        start_ns: int | None = None,
        stop_ns: int | None = None,
        max_windows_per_query: int = 6,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        ssl_context: ssl.SSLContext | None = None,
        clock: Callable[[], int] = time.time_ns,
        clock_speed: float = 1.0,
        backfill_from: tuple[InfluxSettings, ...] = (),
    ) -> None:
        if n_shards < 1 or window_seconds <= 0 or lag_seconds < 0:
            raise ValueError("need n_shards >= 1, window_seconds > 0, lag_seconds >= 0")
        self.settings, self.n_shards = settings, n_shards
        self.backfill_from = backfill_from or (settings,)
        self.window_ns, self.lag_ns = int(window_seconds * 1e9), int(lag_seconds * 1e9)
        self.start_ns, self.stop_ns, self.clock = start_ns, stop_ns, clock
        self.clock_speed = clock_speed
        self.max_windows = max_windows_per_query
        self.receiver = PushReceiver(
            self._deliver,
            token=push_token,
            host=host,
            port=port,
            bucket=settings.bucket,
            max_body_bytes=max_body_bytes,
            ssl_context=ssl_context,
        )
        self._parts: dict[int, PushPartition] = {}
        self._owners: dict[str, int] = {}
        self._lock = threading.Lock()
        self._started = False
        self._live = False
        self.stats: dict[str, PushStats] = {}  # per shard of this process, kept after close

    def wake_at(self, clock_ns: int) -> datetime:
        """When, by this host's clock, ``clock`` reads ``clock_ns``."""
        wait_ns = max(0, clock_ns - self.clock()) / self.clock_speed
        return _at(time.time_ns() + int(wait_ns))

    def first_window_after(self, time_ns: int) -> int:
        return -(-time_ns // self.window_ns) * self.window_ns

    def list_parts(self) -> list[str]:
        return shard_names(self.n_shards)

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> PushPartition:
        now = self.clock()
        cursor = resume_state
        if cursor is None:
            start = self.start_ns if self.start_ns is not None else now - self.lag_ns
            cursor = start // self.window_ns * self.window_ns
        with self._lock:
            # The push cannot give what was sent before the partition was there: what an
            # earlier run took (a restart), what this process's receiver routed before
            # (another worker started it), and on a fresh start whatever was written before
            # the stream existed (a stream created with the flow, or the history before
            # --start-ns's windows close). That is in the bucket only, written before now and
            # stamped before now + lag, so the push starts after it and Flux reads the rest.
            floor = self.first_window_after(now + self.lag_ns)
            part = PushPartition(self, for_part, cursor, floor)
            if self._live:
                part.go_live(floor)
            self._parts[part.index] = part
            self.stats[for_part] = part.stats
        return part

    def start_receiving(self) -> None:
        """Starts the receiver once (at the first ``next_batch``: by then the worker has built
        all its partitions, so none misses the first lines)."""
        with self._lock:
            if not self._started and self._parts:
                self.receiver.start()
                self._started = True

    def forget(self, part: PushPartition) -> None:
        with self._lock:
            self._parts.pop(part.index, None)
            if not self._parts and self._started:
                self.receiver.stop()
                self._started = False

    def _deliver(self, lines: list[str], label: str) -> None:
        """Routes a request's lines to the partitions of this process (the receiver's thread)."""
        by_owner: dict[int, list[tuple[int, str]]] = {}
        shared: list[tuple[int, str]] = []
        with self._lock:
            parts = dict(self._parts)
            if not self._live and self._is_live(lines):
                # The queue has drained up to data of a window still open: from the first window
                # after now + lag on (anything pushed before now is in the bucket, stamped
                # before now + lag), the push gives every line; before it, Flux does.
                self._live = True
                closing = self._closing()
                for part in parts.values():
                    part.go_live(closing)
                _log.info("push stream live at window %d", closing // self.window_ns)
        for number, line in enumerate(lines, 1):
            owner = line_owner(line, self.n_shards, self._owners) if self.n_shards > 1 else 0
            if owner < 0:
                shared.append((number, line))
            elif owner in parts:
                by_owner.setdefault(owner, []).append((number, line))
            # else: another process's shard; its own receiver takes it
        for index, part in parts.items():
            part.take(by_owner.get(index, []), shared, label)

    def _closing(self) -> int:
        """The start of the window that closes next."""
        return (self.clock() - self.lag_ns) // self.window_ns * self.window_ns

    def _is_live(self, lines: list[str]) -> bool:
        """Whether a request carries a line of the window that closes next, or a later one:
        the queue has drained to about now (a stream behind by more than the lag would make
        its lines late anyway, and they are counted so)."""
        recent = self._closing() - self.window_ns
        return any((line_stamp(line) or 0) >= recent for line in lines)


class PushPartition(StatefulSourcePartition[WindowBatch, int]):
    """One shard: pending windows of pushed lines, and the Flux backfill before ``push_from``.
    Its cursor is the end of the last window it emitted (ns)."""

    def __init__(self, source: PushSource, shard: str, cursor_ns: int, floor_ns: int) -> None:
        self._source, self.shard = source, shard
        self.index = int(shard.rsplit("-", 1)[1])
        self._cursor = cursor_ns
        # None until the stream is live: until then Flux reads every window as it closes.
        self.push_from: int | None = None
        self._floor = floor_ns  # the push cannot start before it (see PushSource.build_part)
        self._pending: dict[int, dict[str, str]] = {}  # window -> line -> where it came from
        self._seen: dict[int, set[int]] = {}  # closed window -> hashes of its lines
        self._errors: list[ErrorRecord] = []
        self._lock = threading.Lock()
        self._awake: datetime | None = None
        self._owners: dict[str, int] = {}  # node -> shard, for lines every shard decodes
        # Telegraf and dcgm-exporter lines become Reflex points (schemas/foreign_translate.py);
        # they carry host, not node, so every shard translates them and keeps its own rows.
        self._foreign = ForeignTranslator()
        self._warned = False  # that the stream has not taken over
        self.stats = PushStats()
        self._readers = [
            InfluxSource(
                settings,
                n_shards=source.n_shards,
                window_seconds=source.window_ns / 1e9,
                lag_seconds=source.lag_ns / 1e9,
                stop_ns=source.stop_ns,
                max_windows_per_query=source.max_windows,
                clock=source.clock,
            )
            for settings in source.backfill_from
        ]
        # The backfill translates foreign points with the push's translator: one memory (last
        # XID, counters) whichever way a window comes.
        parts = [InfluxPartition(r, shard, cursor_ns, translator=self._foreign)
                 for r in self._readers]  # fmt: skip
        self._backfill: InfluxPartition | InstancesPartition | None = (
            parts[0] if len(parts) == 1 else InstancesPartition(parts, cursor_ns)
        )

    def go_live(self, closing_ns: int) -> None:
        """The stream has drained to about now, ``closing_ns`` the start of the window that
        closes next: windows from there (or the floor) on come from the push, earlier ones
        from Flux. Every line of those windows reaches the push from now on, or reached it
        already and waits in a pending window."""
        push_from_ns = max(closing_ns, self._floor)
        with self._lock:
            self.push_from = push_from_ns
            stop = self._source.stop_ns
            for reader in self._readers:
                reader.stop_ns = push_from_ns if stop is None else min(stop, push_from_ns)
            for window in [w for w in self._pending if w * self._source.window_ns < push_from_ns]:
                self.stats.covered += len(self._pending.pop(window))

    # ---- the receiver's side --------------------------------------------------------------

    def take(self, mine: list[tuple[int, str]], shared: list[tuple[int, str]], label: str) -> None:
        """Files a request's lines of this shard (``shared``: those of unknown shard)."""
        window_ns = self._source.window_ns
        with self._lock:
            closed = self._cursor // window_ns
            # Before the stream is live, Flux reads every window; after, those before push_from.
            flux_until = self.push_from if self.push_from is not None else closed * window_ns
            for lines, counted in ((mine, True), (shared, self.index == 0)):
                for number, line in lines:
                    stamp = line_stamp(line)
                    if stamp is None:
                        if counted:
                            where = f"{label} line {number}"
                            self._reject("timestamp_not_plain_ns", f"{where}: {line[-60:]}")
                        continue
                    window = stamp // window_ns
                    if stamp < flux_until:
                        self.stats.covered += 1  # Flux reads it (or read it) from the bucket
                        continue
                    if window < closed:
                        if hash(line) in self._seen.get(window, ()):
                            self.stats.duplicates += 1
                        elif counted:
                            self.stats.late += 1
                            behind = (closed * window_ns - stamp) / 1e9
                            detail = f"{label} line {number}: {behind:,.1f} s behind closed windows"
                            self._errors.append(ErrorRecord("source", LATE_REASON, detail))
                        continue
                    pending = self._pending.setdefault(window, {})
                    if line in pending:
                        self.stats.duplicates += 1
                        continue
                    pending[line] = f"{label} line {number}" if counted else ""
                    self.stats.lines += 1

    def _reject(self, code: str, detail: str) -> None:
        self.stats.rejected += 1
        self._errors.append(ErrorRecord("source", code, detail[:300]))

    # ---- the Bytewax partition ------------------------------------------------------------

    def next_batch(self) -> list[WindowBatch]:
        self._source.start_receiving()
        from_flux = self._from_flux()
        if from_flux is not None:
            return from_flux
        src = self._source
        closed_until = (src.clock() - src.lag_ns) // src.window_ns * src.window_ns
        if src.stop_ns is not None:
            if self._cursor >= src.stop_ns:
                raise StopIteration
            closed_until = min(closed_until, -(-src.stop_ns // src.window_ns) * src.window_ns)
        if self._cursor >= closed_until:
            self._awake = src.wake_at(self._cursor + src.window_ns + src.lag_ns)
            return []
        with self._lock:
            ready = sorted(w for w in self._pending if w < closed_until // src.window_ns)
            windows = [(w, self._pending.pop(w)) for w in ready]
            self._cursor = closed_until
            for window, lines in windows:
                self._seen[window] = {hash(line) for line in lines}
            oldest = closed_until // src.window_ns - _REMEMBERED_WINDOWS
            for window in [w for w in self._seen if w < oldest]:
                del self._seen[window]
            errors, self._errors = self._errors, []
        batches = [self._batch(window, lines) for window, lines in windows]
        if errors:
            if not batches:  # rejects travel on their own when no window has data
                batches = [self._batch(closed_until // src.window_ns - 1, {})]
            batches[0].errors = errors + batches[0].errors
        self.stats.windows += len(windows)
        self._awake = src.wake_at(self._cursor + src.window_ns + src.lag_ns)
        return batches

    def _from_flux(self) -> list[WindowBatch] | None:
        """The backfill's next windows; None once the push has taken over."""
        if self._backfill is None:
            return None
        if self.push_from is not None and self._cursor >= self.push_from:
            self._backfill.close()  # Flux has read up to where the push starts
            self._backfill = None
            return None
        try:
            batches = self._backfill.next_batch()
        except StopIteration:
            self._backfill.close()
            self._backfill = None
            return None
        window_ns = self._source.window_ns
        with self._lock:
            self._cursor = self._backfill.snapshot()
            for window in [w for w in self._pending if w < self._cursor // window_ns]:
                self.stats.covered += len(self._pending.pop(window))
        # Still behind: at once; caught up: when the next window closes.
        behind = batches or self._backfill.next_awake() is None
        target = self._cursor + window_ns + self._source.lag_ns
        self._awake = None if behind else self._source.wake_at(target)
        self.stats.backfill_windows += len(batches)
        if (
            self.push_from is None
            and not self._warned
            and (self.stats.backfill_windows >= _NOT_LIVE_WARNING_WINDOWS)
        ):
            self._warned = True
            _log.warning(
                "%s: %d windows read with Flux and the replication stream has not caught up "
                "(no push for an open window yet): check `reflex replication status`",
                self.shard,
                _NOT_LIVE_WARNING_WINDOWS,
            )
        return batches

    def _batch(self, window: int, lines: dict[str, str]) -> WindowBatch:
        src = self._source
        frames, errors = self._frames(lines)
        start = window * src.window_ns
        # Lines of unknown shard were decoded by every shard: each keeps its own rows.
        frames = select_shard(frames, self.index, src.n_shards, self._owners)
        return WindowBatch(
            self.shard,
            window,
            start,
            start + src.window_ns,
            frames,
            errors=errors,
            n_shards=src.n_shards,
        )

    def _frames(self, lines: dict[str, str]) -> tuple[list[Frame], list[ErrorRecord]]:
        """A window's lines as frames, in sorted line order (the stream's batching must not
        change them): Reflex lines decoded in one block (schemas/line_decoder.py), foreign
        ones one by one, as the translator keeps memory; rejects counted where ``lines`` says.
        Each reject is kept with the place of its line, so they go out in line order."""
        block_lines: list[str] = []
        points: list[tuple[int, Point]] = []  # a point after b block lines sorts at 2b
        errors: list[tuple[int, ErrorRecord]] = []
        for line in sorted(lines):
            if self._foreign.is_reflex_line(line):
                block_lines.append(line)
                continue
            place = 2 * len(block_lines)
            try:
                got, notes = self._foreign.decode(line)
            except Exception as error:
                if lines[line]:  # counted here (its own shard, or shard 0 for shared lines)
                    errors.append((place, self._decode_error(lines[line], error)))
                continue
            points += [(place, point) for point in got]
            if lines[line]:
                errors += [(place, ErrorRecord(n.where, n.code, n.detail)) for n in notes]
        block = decode_block(block_lines, carry_tags=True)
        for position, refused in block.rejects:
            where = lines[block_lines[position]]
            if where:
                errors.append((2 * position + 1, self._decode_error(where, refused)))
        parts = points_parts(points, load_schema())
        parts += [
            FramePart.of(frame, 2 * positions + 1)
            for frame, positions in zip(block.frames, block.positions, strict=True)
        ]
        errors.sort(key=lambda placed: placed[0])
        return assemble(parts)[0], [record for _, record in errors]

    def _decode_error(self, where: str, error: Exception) -> ErrorRecord:
        self.stats.rejected += 1
        code = error.code if isinstance(error, PointError) else "unparseable"
        return ErrorRecord("source", code, f"{where}: {error}"[:300])

    def next_awake(self) -> datetime | None:
        return self._awake

    def snapshot(self) -> int:
        return self._cursor

    def close(self) -> None:
        if self._backfill is not None:
            self._backfill.close()
        self._source.forget(self)


def _at(time_ns: int) -> datetime:
    return datetime.fromtimestamp(time_ns / 1e9, tz=UTC)
