"""What the node agent tells operators: its Prometheus metrics and its health.

Everything is read from the running agent at scrape time (model: prometheus/client_python
``process_collector.py``): the agent's loop is never slowed or touched. Served by
:class:`influx.health_server.HealthServer` when ``reflex collect --health-address`` is given.

Metrics (``reflex_agent_*``): ``info{version}``; per collector ``collector_runs_total``,
``collector_cpu_seconds_total`` (on the agent's thread), ``collector_failures_total``,
``collector_rejected_total`` (points that broke the schema and garbled source reads);
``emit_failures_total``; the queue in front of the writer (``queue_points``,
``dropped_points_total`` when it was full); the writer's
``points_sent_total``, ``points_spooled_total``, ``points_rejected_total{reason}``,
``points_dropped_spool_full_total``, ``writer_backlog_points``; and on disk ``spool_bytes`` and
``journal_bytes``; ``loop_overdue_seconds``.

Health: unhealthy when the collector loop is overdue by more than ``stuck_after_s`` (a run that
hangs: a wedged NVML call, a stuck read), or when points wait for InfluxDB and the writer has
delivered nothing for ``stuck_after_s`` (InfluxDB away, a revoked token): the spool keeps them,
but an operator should know. ``/livez`` reports the loop only: restarting the agent fixes a
hung collector, never an InfluxDB that is away.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from reflex_localize.collectors.agent import Agent, _garbled_reads
from reflex_localize.influx.health_server import HealthServer, parse_address


def agent_version() -> str:
    try:
        return metadata.version("reflex-localize")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def _dir_bytes(path: Path | None) -> int:
    """Bytes of the plain files directly in ``path`` (0 when it is absent)."""
    if path is None or not path.is_dir():
        return 0
    total = 0
    for entry in path.iterdir():
        try:
            if entry.is_file():
                total += entry.stat().st_size
        except OSError:  # a segment removed while we looked
            continue
    return total


class AgentMetrics:
    """A Prometheus collector and a health check over one agent and its sink.

    ``sink`` is a ``collectors.sinks.WriterSink`` (or a ``StdoutSink``: no writer figures).
    """

    def __init__(
        self,
        agent: Agent,
        sink: Any = None,
        spool_dir: Path | None = None,
        *,
        stuck_after_s: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.agent, self.sink, self.spool_dir = agent, sink, spool_dir
        self.stuck_after_s, self._clock = stuck_after_s, clock
        self.version = agent_version()
        self._sent_seen: tuple[int, float] | None = None  # (points sent, when first seen)

    def describe(self) -> list[Metric]:
        return []  # collected at scrape time only; no duplicate check needed

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily("reflex_agent_info", "The agent's version.", labels=["version"])
        info.add_metric([self.version], 1)
        yield info
        yield from self._collector_metrics()
        yield CounterMetricFamily(
            "reflex_agent_emit_failures",
            "Batches the agent could not hand to its sink.",
            value=self.agent.emit_failures,
        )
        yield GaugeMetricFamily(
            "reflex_agent_loop_overdue_seconds",
            "How late the most overdue collector is (0 when on time).",
            value=self.loop_overdue_s(),
        )
        yield from self._writer_metrics()

    def _collector_metrics(self) -> Iterator[Metric]:
        runs = CounterMetricFamily(
            "reflex_agent_collector_runs", "Runs per collector.", labels=["collector"]
        )
        failures = CounterMetricFamily(
            "reflex_agent_collector_failures", "Runs that raised.", labels=["collector"]
        )
        cpu = CounterMetricFamily(
            "reflex_agent_collector_cpu_seconds",
            "CPU time of the runs on the agent's thread, user and system.",
            labels=["collector"],
        )
        rejected = CounterMetricFamily(
            "reflex_agent_collector_rejected",
            "Records refused: points that broke the schema, garbled source reads.",
            labels=["collector"],
        )
        for state in self.agent.states:
            name = [state.collector.name]
            runs.add_metric(name, state.runs)
            cpu.add_metric(name, state.cpu_seconds)
            failures.add_metric(name, state.failures)
            rejected.add_metric(name, state.rejected + _garbled_reads(state.collector))
        yield from (runs, cpu, failures, rejected)

    def _writer_metrics(self) -> Iterator[Metric]:
        writer: Any = getattr(self.sink, "writer", None)
        stats = getattr(writer, "stats", None)
        if stats is None:  # no sink, or --stdout: nothing waits for InfluxDB
            return
        # The queue is the sink's own (collectors/sinks.py, same package).
        queued = getattr(self.sink, "_queued_points", 0)
        yield GaugeMetricFamily(
            "reflex_agent_queue_points", "Points queued for the writer.", value=queued
        )
        yield CounterMetricFamily(
            "reflex_agent_dropped_points",
            "Points dropped because the queue was full.",
            value=getattr(self.sink, "dropped", 0),
        )
        for name, help_text, value in (
            ("points_sent", "Points InfluxDB acknowledged.", stats.sent),
            ("points_spooled", "Points written to the disk spool.", stats.spooled),
            ("points_dropped_spool_full", "Oldest points dropped.", stats.dropped_spool_full),
        ):
            yield CounterMetricFamily(f"reflex_agent_{name}", help_text, value=value)
        rejected = CounterMetricFamily(
            "reflex_agent_points_rejected", "Points refused, by reason.", labels=["reason"]
        )
        for reason, count in sorted(stats.rejected_by_reason.items()):
            rejected.add_metric([reason], count)
        yield rejected
        yield GaugeMetricFamily(
            "reflex_agent_writer_backlog_points",
            "Points in the writer's memory, not yet delivered.",
            value=writer.backlog,
        )
        yield GaugeMetricFamily(
            "reflex_agent_spool_bytes", "Bytes waiting in the spool.", value=self._spool_bytes()
        )
        journal = self.spool_dir / "journal" if self.spool_dir else None
        yield GaugeMetricFamily(
            "reflex_agent_journal_bytes",
            "Bytes in the write-ahead journal.",
            value=_dir_bytes(journal),
        )

    def _spool_bytes(self) -> int:
        return _dir_bytes(self.spool_dir)

    def loop_overdue_s(self) -> float:
        if not self.agent.states:
            return 0.0
        due = min(state.next_due for state in self.agent.states)
        return max(0.0, self.agent.clock.monotonic() - due)

    def loop_problem(self) -> str | None:
        overdue = self.loop_overdue_s()
        if overdue > self.stuck_after_s:
            return f"collector loop stuck: a collector is {overdue:.0f} s overdue"
        return None

    def problem(self) -> str | None:
        """Why the agent is unhealthy, or None; see the module docstring."""
        loop = self.loop_problem()
        if loop is not None:
            return loop
        writer = getattr(self.sink, "writer", None)
        if writer is None or not hasattr(writer, "stats"):
            return None
        now, sent = self._clock(), writer.stats.sent
        if self._sent_seen is None or self._sent_seen[0] != sent:
            self._sent_seen = (sent, now)
            return None
        waiting = getattr(self.sink, "_queued_points", 0) + writer.backlog
        spooled = self._spool_bytes()
        idle = now - self._sent_seen[1]
        if (waiting or spooled) and idle > self.stuck_after_s:
            return (
                f"writer stuck: nothing delivered to InfluxDB for {idle:.0f} s, "
                f"{waiting} points queued and {spooled} bytes spooled"
            )
        return None


def serve_agent_health(
    address: str, agent: Agent, sink: Any, spool_dir: Path | None, **options: Any
) -> HealthServer:
    """Starts ``/healthz`` and ``/metrics`` for the agent on ``address`` (``HOST:PORT``)."""
    metrics = AgentMetrics(agent, sink, spool_dir, **options)
    registry = CollectorRegistry()
    registry.register(metrics)
    server = HealthServer(parse_address(address), metrics.problem, registry, metrics.loop_problem)
    server.start()
    return server
