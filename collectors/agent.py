"""The node agent: runs each collector at its own interval and hands the points to ``emit``.

Each run is timed and checked: its wall time and its CPU time on the agent's thread (user and
system, so NVML's ioctls count: ``time.thread_time``). Points that break the schema are dropped
and counted, never written. A collector that raises is recorded as a failed run and the others
go on; one that raises :class:`collectors.base.HardwareAbsent` is a successful run with no
points. After each run the agent emits one ``reflex_collector`` point with the run's duration,
CPU time, success, point count, the agent's version and the collector's rejected records since
start: points that broke the schema, plus the garbled source reads a collector counts itself
(``parse_errors``, by source). :meth:`Agent.nothing_worked` says when every collector failed
(``collect --once``).

With a :class:`~influx.clock_offset.ClockOffset` (fed by the writer from InfluxDB's answers)
the self-metric also carries ``clock_offset_seconds``, and when the node's clock is known to be
off by more than the tolerance, every point is stamped with the server's time instead: a clock
30 s behind would otherwise make every point late for the flow, and the node look missing.
The log says so once, with the offset, so the broken NTP gets fixed.

>>> from reflex_localize.collectors.base import FixedClock
>>> class Hello:
...     name, interval_s = "hello", 1.0
...     def collect(self, now_ns):
...         yield Point("host", {"cluster": "c1", "node": "n1"}, {"load1": 0.5}, now_ns)
>>> written = []
>>> agent = Agent([Hello()], written.extend, cluster="c1", node="n1", clock=FixedClock(10))
>>> [p.measurement for p in agent.run_once()]
['host', 'reflex_collector']
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata

from reflex_localize.collectors.base import (
    BackgroundCollector,
    Clock,
    Collector,
    Emit,
    HardwareAbsent,
    SystemClock,
)
from reflex_localize.influx.clock_offset import ClockOffset
from reflex_localize.schemas.codec import Point, PointError, checked_tag_value, validate
from reflex_localize.schemas.contract import Schema, load_schema

INT64_MAX = 2**63 - 1

log = logging.getLogger(__name__)


@dataclass
class CollectorState:
    """Scheduling and counters of one collector (mutable: the agent updates it every run)."""

    collector: Collector
    next_due: float = 0.0
    runs: int = 0
    failures: int = 0
    rejected: int = 0
    cpu_seconds: float = 0.0  # since start, on the agent's thread
    absent_logged: bool = False
    last_outcome: str = ""  # of the latest run: "ok", "absent" or "failed"
    last_reason: str = ""  # why it was absent or failed


class Agent:
    """Schedules collectors; see the module docstring."""

    def __init__(
        self,
        collectors: Sequence[Collector],
        emit: Emit,
        *,
        cluster: str,
        node: str,
        clock: Clock | None = None,
        schema: Schema | None = None,
        clock_offset: ClockOffset | None = None,
        site: Mapping[str, str] | None = None,
        cpu_clock: Callable[[], float] = time.thread_time,
    ) -> None:
        self.clock: Clock = clock or SystemClock()
        self.cpu_clock = cpu_clock  # collectors run on the calling thread: its CPU is theirs
        # Site tags ([identity] rack, switch) on every point handed off, self-metrics and hook
        # records included; checked once here, as the writer checks every tag.
        self.site = {name: checked_tag_value(value, "identity", name)
                     for name, value in (site or {}).items()}  # fmt: skip
        self.clock_offset = clock_offset
        self._correction_ns = 0  # the correction last applied, to log when it changes
        self.schema = schema or load_schema()
        self.version = package_version()
        self.emit_failures = 0
        self._emit = emit
        self._emit_lock = threading.Lock()
        self._tags = {"cluster": cluster, "node": node}
        start = self.clock.monotonic()
        self.states = [CollectorState(collector, next_due=start) for collector in collectors]

    def emit(self, points: list[Point]) -> None:
        """Thread-safe hand-off to the sink (background collectors call it); stamps are
        corrected first. A failing sink is counted, never raised."""
        self._hand_off(self._corrected(points))

    def _hand_off(self, points: list[Point]) -> None:
        if not points:
            return
        if self.site:
            points = [dataclasses.replace(p, tags={**p.tags, **self.site}) for p in points]
        with self._emit_lock:
            try:
                self._emit(points)
            except Exception:
                self.emit_failures += 1
                log.exception("could not hand %d points to the writer", len(points))

    def run_once(self) -> list[Point]:
        """Runs every collector once, now; returns (and emits) what they produced."""
        produced: list[Point] = []
        for state in self.states:
            produced += self._run(state)
        return produced

    def tick(self) -> float:
        """Runs the collectors that are due; returns the seconds until the next one is."""
        for state in self.states:
            now = self.clock.monotonic()
            if state.next_due > now:
                continue
            self._run(state)
            interval = state.collector.interval_s
            state.next_due += interval
            if state.next_due <= now:  # fell behind (a slow run, a suspended VM): skip, no burst
                state.next_due = now + interval
        return max(0.0, min(s.next_due for s in self.states) - self.clock.monotonic())

    def run(self, stop: threading.Event) -> None:
        """Runs until ``stop`` is set, with background collectors (XID watcher) alongside."""
        background = [
            s.collector for s in self.states if isinstance(s.collector, BackgroundCollector)
        ]
        for collector in background:
            collector.start_background(self.emit)
        try:
            while not stop.is_set():
                stop.wait(self.tick() if self.states else 1.0)
        finally:
            for collector in background:
                collector.stop_background()

    def _run(self, state: CollectorState) -> list[Point]:
        collector = state.collector
        started = self.clock.monotonic()
        cpu_started = self.cpu_clock()
        now_ns = self.clock.time_ns()
        success = True
        raw: list[Point] = []
        state.last_outcome, state.last_reason = "ok", ""
        try:
            raw = list(collector.collect(now_ns))
        except HardwareAbsent as absent:
            state.last_outcome, state.last_reason = "absent", str(absent)
            if not state.absent_logged:
                log.info("collector %s: hardware absent (%s)", collector.name, absent)
                state.absent_logged = True
        except Exception as error:
            success = False
            state.failures += 1
            state.last_outcome, state.last_reason = "failed", f"{type(error).__name__}: {error}"
            log.exception("collector %s failed", collector.name)
        points = self._valid(state, raw)
        cpu_seconds = max(0.0, self.cpu_clock() - cpu_started)
        state.runs += 1
        state.cpu_seconds += cpu_seconds
        fields: dict[str, float | int | bool | str] = {
            "duration_seconds": max(0.0, self.clock.monotonic() - started),
            "cpu_seconds": cpu_seconds,
            "success": success,
            "points": len(points),
            # A counter a lying source inflated past int64 (a hook datagram's drop count)
            # stays at the top rather than make this point, and its batch, unwritable.
            "errors": min(state.rejected + _garbled_reads(collector), INT64_MAX),
            "version": self.version,
        }
        estimate = self.clock_offset.estimate() if self.clock_offset is not None else None
        if estimate is not None:
            fields["clock_offset_seconds"] = round(estimate.offset_s, 3)
        points.append(
            Point("reflex_collector", {**self._tags, "collector": collector.name}, fields, now_ns)
        )
        points = self._corrected(points)
        self._hand_off(points)
        return points

    def nothing_worked(self) -> str | None:
        """After a run: why, when at least one collector failed and none worked (hardware
        absent is neither); else None."""
        failed = [s for s in self.states if s.last_outcome == "failed"]
        if not failed or any(s.last_outcome == "ok" for s in self.states):
            return None
        reasons = [f"{s.collector.name} ({s.last_reason})" for s in failed]
        absent = [s.collector.name for s in self.states if s.last_outcome == "absent"]
        return f"every collector failed: {'; '.join(reasons)}" + (
            f"; hardware absent: {', '.join(absent)}" if absent else ""
        )

    def _corrected(self, points: list[Point]) -> list[Point]:
        """Points stamped with the server's time when this clock is known to be off."""
        shift = self.clock_offset.correction_ns() if self.clock_offset is not None else 0
        if shift != self._correction_ns:
            self._log_correction(shift)
        if shift == 0:
            return points
        return [dataclasses.replace(point, time_ns=point.time_ns + shift) for point in points]

    def _log_correction(self, shift: int) -> None:
        # Logged when it starts and stops, and when the offset moves by over a second.
        previous, self._correction_ns = self._correction_ns, shift
        if shift == 0:
            log.info("this node's clock is back within tolerance of InfluxDB's: own stamps")
        elif previous == 0 or abs(shift - previous) > 1_000_000_000:
            log.warning(
                "this node's clock is %.1f s %s InfluxDB's: stamping points with InfluxDB's "
                "time; fix its time sync (chronyc tracking, timedatectl)",
                abs(shift) / 1e9,
                "behind" if shift > 0 else "ahead of",
            )

    def _valid(self, state: CollectorState, points: list[Point]) -> list[Point]:
        valid = []
        for point in points:
            try:
                valid.append(validate(point, self.schema))
            except PointError as error:
                state.rejected += 1
                if state.rejected <= 10 or state.rejected % 1000 == 0:
                    log.warning(
                        "collector %s emitted a bad point (%d so far): %s",
                        state.collector.name,
                        state.rejected,
                        error,
                    )
        return valid


def package_version() -> str:
    """The installed reflex-localize version, written in every self-metric."""
    try:
        return metadata.version("reflex-localize")
    except metadata.PackageNotFoundError:  # a checkout that was never installed
        return "unknown"


def _garbled_reads(collector: Collector) -> int:
    """Source reads the collector could not parse and skipped (the host collector's files)."""
    counts = getattr(collector, "parse_errors", None)
    return sum(counts.values()) if isinstance(counts, dict) else 0
