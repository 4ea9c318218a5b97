"""What the flow tells operators: Prometheus metrics and health, per process.

The flow is wrapped, not changed: :func:`metered_source` notes every poll of the source and
the newest window it produced, and :func:`metered_sinks` counts what reaches each sink (the
``shape`` step in front of it). ``shell/flow_wiring.py`` does both and serves them with
:class:`influx.health_server.HealthServer` when ``REFLEX_HEALTH_PORT`` is set; the metrics go
into the registry it is given (Prometheus' default one there, which Bytewax's own ``/metrics``
also serves when ``BYTEWAX_DATAFLOW_API_ENABLED`` is set).

Metrics (``reflex_flow_*``): ``source_batches_total``; ``source_lag_seconds`` (wall clock minus
the end of the newest window the source produced: for a replay of the past, how far in the
past it is); ``last_poll_age_seconds``; ``events_total{trigger,severity}``;
``rejected_records_total{where,reason}`` (the error stream); ``late_points_total`` (rejects
whose reason is ``late``); ``points_emitted_total`` (scores, baselines, rejects counts);
``spool_bytes`` (results waiting on disk for InfluxDB). With a learned impact model:
``impact_model_info{version}``, ``impact_model_age_seconds`` (since the model in use was
written: alert when the nightly refit stops landing), ``impact_model_reloads`` and
``impact_model_failed_loads``.

Health: 503 ``starting`` until the source is first polled; 503 when it has not been polled for
``stuck_after_s`` (a step or a sink blocks the worker: InfluxDB hanging on a write, say).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from bytewax.inputs import (
    DynamicSource,
    FixedPartitionedSource,
    Source,
    StatefulSourcePartition,
    StatelessSourcePartition,
)
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from reflex_localize.flows.impact.model_file import ImpactModelFile
from reflex_localize.flows.io.sinks import FlowSinks, SinkSpec

LATE_REASON = "late"  # the sources' code for a point written after its window closed


class FlowMetrics:
    """The counters and the health check of one flow process; see the module docstring."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        spool_dir: Path | None = None,
        stuck_after_s: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.stuck_after_s, self._clock, self._wall = stuck_after_s, clock, wall_clock
        self.spool_dir = spool_dir
        self._lock = threading.Lock()
        self._last_poll: float | None = None
        self._newest_end_ns: int | None = None
        self.batches = Counter(
            "reflex_flow_source_batches", "Batches the source produced.", registry=registry
        )
        self.events = Counter(
            "reflex_flow_events",
            "Localization events emitted.",
            ["trigger", "severity"],
            registry=registry,
        )
        self.rejected = Counter(
            "reflex_flow_rejected_records",
            "Records refused, by where and reason (the error stream).",
            ["where", "reason"],
            registry=registry,
        )
        self.late = Counter(
            "reflex_flow_late_points", "Points that came after their window.", registry=registry
        )
        self.points = Counter(
            "reflex_flow_points_emitted", "Result points emitted.", registry=registry
        )
        gauges = (
            ("source_lag_seconds", "Wall clock minus the newest window's end.", self.lag_s),
            ("last_poll_age_seconds", "Seconds since the source was polled.", self.poll_age_s),
            ("spool_bytes", "Result bytes spooled for InfluxDB.", self.spool_bytes),
        )
        for name, help_text, read in gauges:
            Gauge(f"reflex_flow_{name}", help_text, registry=registry).set_function(read)
        self._registry = registry

    def watch_impact_model(self, watched: ImpactModelFile) -> None:
        """The learned impact model in use: its version, how old it is, and the refits the
        flow took or refused; a nightly refit that keeps failing shows as a growing age."""
        self._registry.register(_ImpactModelCollector(watched, self._wall))

    # What the wrappers call.
    def polled(self, items: list[Any]) -> None:
        ends = [item.end_ns for item in items if hasattr(item, "end_ns")]
        with self._lock:
            self._last_poll = self._clock()
            if ends:
                self._newest_end_ns = max(self._newest_end_ns or 0, *ends)
        if items:
            self.batches.inc(len(items))

    def counted(self, route: str, item: Any) -> None:
        if route == "event":
            self.events.labels(item.trigger, item.severity).inc()
        elif route == "error":
            self.rejected.labels(item.where, item.reason).inc()
            if item.reason == LATE_REASON:
                self.late.inc()
        elif route == "points":
            self.points.inc(len(item))

    # What the gauges and the health check read.
    def lag_s(self) -> float:
        with self._lock:
            newest = self._newest_end_ns
        return 0.0 if newest is None else max(0.0, self._wall() - newest / 1e9)

    def poll_age_s(self) -> float:
        with self._lock:
            last = self._last_poll
        return 0.0 if last is None else self._clock() - last

    def spool_bytes(self) -> float:
        if self.spool_dir is None or not self.spool_dir.is_dir():
            return 0.0
        return float(sum(p.stat().st_size for p in self.spool_dir.rglob("*") if p.is_file()))

    def problem(self) -> str | None:
        with self._lock:
            last = self._last_poll
        if last is None:
            return "starting: the source has not been polled yet"
        age = self._clock() - last
        if age > self.stuck_after_s:
            return f"stuck: the source has not been polled for {age:.0f} s (a step or sink blocks)"
        return None


class _ImpactModelCollector(Collector):
    """Read at each scrape, so the version label and the age always describe the same model."""

    def __init__(self, watched: ImpactModelFile, wall: Callable[[], float]) -> None:
        self.watched, self.wall = watched, wall

    def collect(self) -> Iterator[GaugeMetricFamily]:
        watched = self.watched
        info = GaugeMetricFamily(
            "reflex_flow_impact_model_info",
            "1 for the version of the learned impact model in use.",
            labels=["version"],
        )
        info.add_metric([watched.model.version], 1.0)
        yield info
        age = max(0.0, self.wall() - watched.written_ns / 1e9)
        for name, help_text, value in (
            ("age_seconds", "Seconds since the model in use was written.", age),
            ("reloads", "Refits taken since start.", watched.reloads),
            ("failed_loads", "Refits refused since start (old model kept).", watched.failed_loads),
        ):
            yield GaugeMetricFamily(f"reflex_flow_impact_model_{name}", help_text, value=value)


class _MeteredStateful(StatefulSourcePartition[Any, Any]):
    def __init__(self, inner: StatefulSourcePartition, metrics: FlowMetrics) -> None:
        self._inner, self._metrics = inner, metrics

    def next_batch(self) -> list[Any]:
        batch = list(self._inner.next_batch())
        self._metrics.polled(batch)
        return batch

    def next_awake(self) -> datetime | None:
        return self._inner.next_awake()

    def snapshot(self) -> Any:
        return self._inner.snapshot()

    def close(self) -> None:
        self._inner.close()


class _MeteredStateless(StatelessSourcePartition[Any]):
    def __init__(self, inner: StatelessSourcePartition, metrics: FlowMetrics) -> None:
        self._inner, self._metrics = inner, metrics

    def next_batch(self) -> list[Any]:
        batch = list(self._inner.next_batch())
        self._metrics.polled(batch)
        return batch

    def next_awake(self) -> datetime | None:
        return self._inner.next_awake()

    def close(self) -> None:
        self._inner.close()


class _MeteredFixed(FixedPartitionedSource[Any, Any]):
    def __init__(self, inner: FixedPartitionedSource, metrics: FlowMetrics) -> None:
        self._inner, self._metrics = inner, metrics
        # A source read in pieces (flows/io/range_replay.py) is assembled by the flow.
        self.emits_pieces = getattr(inner, "emits_pieces", False)

    def list_parts(self) -> list[str]:
        return self._inner.list_parts()

    def build_part(self, step_id: str, for_part: str, resume_state: Any) -> _MeteredStateful:
        part = self._inner.build_part(step_id, for_part, resume_state)
        return _MeteredStateful(part, self._metrics)


class _MeteredDynamic(DynamicSource[Any]):
    def __init__(self, inner: DynamicSource, metrics: FlowMetrics) -> None:
        self._inner, self._metrics = inner, metrics

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _MeteredStateless:
        part = self._inner.build(step_id, worker_index, worker_count)
        return _MeteredStateless(part, self._metrics)


def metered_source(source: Source, metrics: FlowMetrics) -> Source:
    """``source``, noting each poll in ``metrics``; its resume state is the source's own."""
    if isinstance(source, FixedPartitionedSource):
        return _MeteredFixed(source, metrics)
    if isinstance(source, DynamicSource):
        return _MeteredDynamic(source, metrics)
    raise TypeError(f"cannot meter a {type(source).__name__}")


def metered_sinks(sinks: FlowSinks, metrics: FlowMetrics) -> FlowSinks:
    """``sinks``, counting each item on its way into its sink (in the ``shape`` step)."""

    def metered(route: str, spec: SinkSpec | None) -> SinkSpec | None:
        if spec is None:
            return None
        shape = spec.shape

        def counted(item: Any) -> Any:
            metrics.counted(route, item)
            return shape(item)

        return dataclasses.replace(spec, shape=counted)

    events = metered("event", sinks.events)
    assert events is not None
    return FlowSinks(events, metered("points", sinks.points), metered("error", sinks.errors))
