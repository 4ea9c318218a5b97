"""The demo through InfluxDB: telemetry in with the writer, the flow reading it back with the
production source, and its results written with the production sink."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from reflex_localize.flows.io.influx_sink import InfluxSink, event_points
from reflex_localize.flows.io.influx_source import QUERY_TIMEOUT_S, InfluxSource
from reflex_localize.flows.runner import RunResult, run_in_process
from reflex_localize.influx.config import InfluxSettings
from reflex_localize.influx.writer import Writer
from reflex_localize.schemas.frame import Frame

WINDOW_SECONDS = 10.0


def write_telemetry(settings: InfluxSettings, frames: list[Frame], spool: Path) -> int:
    writer = Writer.from_settings(dataclasses.replace(settings, bucket="telemetry"), spool)
    try:
        writer.write_frames(frames)
    finally:
        delivered = writer.close(60.0)
    if not delivered:
        raise RuntimeError(f"InfluxDB did not take all telemetry; the rest waits in {spool}")
    return writer.stats.sent


def run_through_influx(
    settings: InfluxSettings,
    sim: Any,
    frames: list[Frame],
    out_dir: Path,
    on_output: Callable[[str, Any], None],
    console: Console,
) -> RunResult:
    with console.status("writing the simulated telemetry into InfluxDB"):
        sent = write_telemetry(settings, frames, out_dir / "spool-telemetry")
    console.print(f"wrote {sent:,} telemetry points to {settings.url} (bucket telemetry)")
    source = InfluxSource(
        dataclasses.replace(settings, bucket="telemetry", timeout_s=QUERY_TIMEOUT_S),
        n_shards=1,
        window_seconds=WINDOW_SECONDS,
        lag_seconds=0.0,
        start_ns=sim.start_ns,
        stop_ns=sim.start_ns + int(sim.duration_s * 1e9),
    )
    results = InfluxSink(
        dataclasses.replace(settings, bucket="reflex"), out_dir / "spool-results"
    ).build("demo", 0, 1)

    def forward(route: str, item: Any) -> None:
        # The production sink's own partition, so the demo writes results the way `reflex
        # flow` does (events keyed by their deterministic id and time).
        if route == "event":
            results.write_batch([("event", event_points(item))])
        elif route == "points":
            results.write_batch([("points", item)])
        on_output(route, item)

    try:
        return run_in_process(source, window_seconds=WINDOW_SECONDS, on_output=forward)
    finally:
        results.close()
