"""The node agent: runs each collector at its own interval and hands the points to ``emit``.

Each run is timed and checked. Points that break the schema are dropped and counted, never
written. A collector that raises is recorded as a failed run and the others go on; one that
raises :class:`collectors.base.HardwareAbsent` is a successful run with no points. After each
run the agent emits one ``reflex_collector`` point with the run's duration, success, point
count and the collector's rejected points since start.

>>> from collectors.base import FixedClock
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

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from collectors.base import BackgroundCollector, Clock, Collector, Emit, HardwareAbsent, SystemClock
from schemas.codec import Point, PointError, validate
from schemas.contract import Schema, load_schema

log = logging.getLogger(__name__)


@dataclass
class CollectorState:
    """Scheduling and counters of one collector (mutable: the agent updates it every run)."""

    collector: Collector
    next_due: float = 0.0
    runs: int = 0
    failures: int = 0
    rejected: int = 0
    absent_logged: bool = False


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
    ) -> None:
        self.clock: Clock = clock or SystemClock()
        self.schema = schema or load_schema()
        self.emit_failures = 0
        self._emit = emit
        self._emit_lock = threading.Lock()
        self._tags = {"cluster": cluster, "node": node}
        start = self.clock.monotonic()
        self.states = [CollectorState(collector, next_due=start) for collector in collectors]

    def emit(self, points: list[Point]) -> None:
        """Thread-safe hand-off to the sink; a failing sink is counted, never raised."""
        if not points:
            return
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
        now_ns = self.clock.time_ns()
        success = True
        raw: list[Point] = []
        try:
            raw = list(collector.collect(now_ns))
        except HardwareAbsent as absent:
            if not state.absent_logged:
                log.info("collector %s: hardware absent (%s)", collector.name, absent)
                state.absent_logged = True
        except Exception:
            success = False
            state.failures += 1
            log.exception("collector %s failed", collector.name)
        points = self._valid(state, raw)
        state.runs += 1
        self_metric = Point(
            "reflex_collector",
            {**self._tags, "collector": collector.name},
            {
                "duration_seconds": max(0.0, self.clock.monotonic() - started),
                "success": success,
                "points": len(points),
                "errors": state.rejected,
            },
            now_ns,
        )
        points.append(self_metric)
        self.emit(points)
        return points

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
