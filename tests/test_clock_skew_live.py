"""A node clock 30 s behind and one 30 s ahead, live, through the real InfluxDB.

Four real agents (the real Agent, collectors, WriterSink, Writer) write to the real server;
two of them have clocks skewed by ∓30 s, and a third stops part-way: a node lost. The real
flow reads the bucket live through :class:`~flows.influx_source.InfluxSource` with 2-second
windows. With the clock correction on
(the default) every node's points land in their windows: no point is late and no node is
called missing but the one that stopped, in one event.

With it off (measure only), the points of a node whose clock is behind all arrive after their
windows closed: they are counted late and never scored, and the node's membership is late
too, so the flow never even learns the node is in the job. The control run shows that with a
clock 8 s behind (30 s would need a run of over 30 s before the first point comes due).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import query_rows

from reflex_localize.collectors.agent import Agent
from reflex_localize.collectors.base import Collector
from reflex_localize.collectors.gpu import GpuCollector
from reflex_localize.collectors.nvml_fake import FakeNvml
from reflex_localize.collectors.sinks import WriterSink
from reflex_localize.flows.io.influx_source import LATE_REASON, InfluxSource
from reflex_localize.flows.judge.job_step import JobConfig
from reflex_localize.flows.runner import RunResult, run_in_process
from reflex_localize.influx.clock_offset import ClockOffset
from reflex_localize.influx.local_server import InfluxServer
from reflex_localize.influx.writer import Writer
from reflex_localize.schemas.codec import FieldValue, Point

pytestmark = pytest.mark.influx
SECOND = 1_000_000_000
WINDOW_S = 2.0
SKEWS = {"node-ok-1": 0.0, "node-ok-2": 0.0, "node-behind": -30.0, "node-ahead": 30.0}
GPUS = 4


@dataclass
class SkewedClock:
    skew_ns: int

    def time_ns(self) -> int:
        return time.time_ns() + self.skew_ns

    def monotonic(self) -> float:
        return time.monotonic()


class Membership:
    """What the training hook restates: this node's ranks of the one job."""

    name, interval_s = "membership", 0.5

    def __init__(self, node: str, first_rank: int, nodes: int) -> None:
        self.node, self.first_rank, self.nodes = node, first_rank, nodes

    def collect(self, now_ns: int) -> Iterator[Point]:
        for gpu in range(GPUS):
            rank = self.first_rank + gpu
            tags = {"cluster": "c", "job": "llm", "node": self.node, "rank": str(rank)}
            fields: dict[str, FieldValue] = {
                "gpu": gpu,
                "world_size": GPUS * self.nodes,
                "dp_rank": rank,
                "pp_rank": 0,
                "tp_rank": 0,
                "pp_size": 1,
                "profile": "H100-SXM5-80GB",
                "active": True,
            }
            yield Point("job_membership", tags, fields, now_ns)


def run_live(
    influx: InfluxServer,
    bucket: str,
    tmp: Path,
    skews: dict[str, float],
    correct: bool,
    lose: str | None = None,
) -> RunResult:
    """Runs one agent per node and the flow over 7 windows; ``lose``'s agent stops after 2."""
    stops = {node: threading.Event() for node in skews}
    threads, sinks = [], []
    for number, (node, skew_s) in enumerate(skews.items()):
        clock = SkewedClock(int(skew_s * SECOND))
        offset = ClockOffset(correct=correct, wall=clock.time_ns)
        writer = Writer(
            influx.url, influx.token, influx.org, bucket, tmp / node, clock_offset=offset
        )
        # As `reflex collect` does before its first run (2 s there); generous here, because
        # a loaded CI machine can take longer and this test is about what the probe gives.
        assert writer.probe_clock(timeout_s=15.0)
        sink = WriterSink(writer, flush_interval_s=0.3)
        collectors: list[Collector] = [
            GpuCollector("c", node, nvml=FakeNvml.h100_node(gpus=GPUS), interval_s=0.5),
            Membership(node, number * GPUS, len(skews)),
        ]
        agent = Agent(
            collectors, sink.emit, cluster="c", node=node, clock=clock, clock_offset=offset
        )
        threads.append(threading.Thread(target=agent.run, args=(stops[node],), daemon=True))
        sinks.append(sink)
    for thread in threads:
        thread.start()
    try:
        time.sleep(2.0)  # a few answers from the server: the offsets are measured
        window_ns = int(WINDOW_S * SECOND)
        start = -(-time.time_ns() // window_ns) * window_ns
        source = InfluxSource(
            influx.settings(bucket),
            n_shards=1,
            window_seconds=WINDOW_S,
            lag_seconds=2.0,
            start_ns=start,
            stop_ns=start + 7 * window_ns,
            late_check_seconds=WINDOW_S,
            late_horizon_seconds=40.0,
        )
        if lose is not None:
            threading.Timer((start - time.time_ns()) / 1e9 + 2 * WINDOW_S, stops[lose].set).start()
        config = JobConfig(window_seconds=WINDOW_S, cluster="c", max_pending_windows=2)
        return run_in_process(source, window_seconds=WINDOW_S, job_config=config, cluster="c")
    finally:
        for stop in stops.values():
            stop.set()
        for thread in threads:
            thread.join(5)
        for sink in sinks:
            sink.close()


def stamp_lag_s(influx: InfluxServer, bucket: str, newest: str = "max") -> dict[str, float]:
    """Per node, how far its newest (``max``) or oldest (``min``) stored point is from now
    (positive: in the past)."""
    rows = query_rows(
        influx,
        f'from(bucket: "{bucket}") |> range(start: -5m, stop: 5m)'
        ' |> filter(fn: (r) => r._measurement == "gpu") |> keep(columns: ["_time", "node"])'
        f' |> group(columns: ["node"]) |> {newest}(column: "_time")',
    )
    now = time.time()
    return {row["node"]: now - row["_time"].timestamp() for row in rows}


def test_skewed_clocks_are_corrected_and_only_the_lost_node_is_missing(
    influx: InfluxServer, influx_bucket: str, tmp_path: Path
) -> None:
    began = time.time()
    result = run_live(influx, influx_bucket, tmp_path, SKEWS, correct=True, lose="node-ok-2")
    about = [(e.trigger, e.top.node if e.top else "", e.summary) for e in result.events]
    assert [(trigger, node) for trigger, node, _ in about] == [("explicit", "node-ok-2")], about
    assert "no telemetry" in about[0][2]
    assert result.error_counts[LATE_REASON] == 0
    # The probe told the offset before the first run: not even the first points are stamped
    # 30 s off (none in the future, none from before the agents started).
    lags = stamp_lag_s(influx, influx_bucket)
    assert set(lags) == set(SKEWS)
    assert all(-2.0 < lags[node] < 8.0 for node in SKEWS if node != "node-ok-2"), lags
    oldest = stamp_lag_s(influx, influx_bucket, "min")
    assert all(oldest[node] < time.time() - began + 2.0 for node in SKEWS), oldest
    offsets = query_rows(
        influx,
        f'from(bucket: "{influx_bucket}") |> range(start: -5m, stop: 5m)'
        ' |> filter(fn: (r) => r._field == "clock_offset_seconds")'
        ' |> group(columns: ["node"]) |> last()',
    )
    measured = {row["node"]: row["_value"] for row in offsets}
    print(f"measured offsets {measured}; newest stamps behind now, s: {lags}")
    for node, skew_s in SKEWS.items():
        assert measured[node] == pytest.approx(-skew_s, abs=1.0)


def test_without_the_correction_the_points_of_a_node_behind_are_late(
    influx: InfluxServer, influx_bucket: str, tmp_path: Path
) -> None:
    skews = {"node-ok-1": 0.0, "node-ok-2": 0.0, "node-behind": -8.0}
    result = run_live(influx, influx_bucket, tmp_path, skews, correct=False)
    assert result.error_counts[LATE_REASON] > 0
    lags = stamp_lag_s(influx, influx_bucket)
    assert lags["node-behind"] > 7 and lags["node-ok-1"] < 3
