"""`reflex demo`: a simulated 32-node cluster with injected faults, through the real flow.

The embedded default needs no database: the simulator feeds the Bytewax flow in-process.
With ``--influx-url URL`` or ``--local-influx`` the same run goes through InfluxDB: telemetry
is written there, the flow reads it back with the production source and writes its results
there, and the alert rules are installed. Only the flag does that: a ``REFLEX_INFLUX_URL`` in
the environment (an agent's, say) never sends simulated telemetry to a production database,
but the token, org and TLS settings come from the shared options as for every command.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.io.sinks import error_json, event_json
from reflex_localize.flows.io.sources import MemorySource
from reflex_localize.flows.runner import RunResult, run_in_process
from reflex_localize.influx.config import InfluxSettings
from reflex_localize.schemas.frame import Frame
from reflex_localize.shell.cli_checks import (
    NOT_NEGATIVE,
    OUTPUT_FOLDER,
    SCENARIO,
    check_token,
    influx_refusals,
)
from reflex_localize.shell.demo_view import DemoView
from reflex_localize.shell.eval_harness import LabelMatch, match_labels
from reflex_localize.shell.influx_options import InfluxOptions, influx_options_url_flag_only
from reflex_localize.shell.reject_summary import reject_counts, reject_table
from reflex_localize.shell.simulated_source import simulated_windows
from reflex_localize.simulator.scenario import scenario_names

WINDOW_SECONDS = 10.0
EVENTS_FLUX = """from(bucket: "reflex")
  |> range(start: 2026-01-01T00:00:00Z)
  |> filter(fn: (r) => r._measurement == "reflex_event")
  |> pivot(rowKey: ["_time", "job", "trigger"], columnKey: ["_field"], valueColumn: "_value")
  |> keep(columns: ["_time", "job", "trigger", "suspect_node", "suspect_component",
                    "suspect_index", "confidence", "action", "summary"])"""


@click.command()
@click.option("--scenario", type=SCENARIO, default="demo", show_default=True,
              help="A scenario .toml file, or one of the library's: "
              + ", ".join(scenario_names()) + ".")  # fmt: skip
@click.option("--seed", type=NOT_NEGATIVE, default=7, show_default=True,
              help="Seed of the simulation: one seed, one telemetry, the same events.")  # fmt: skip
@click.option("--out", "out_dir", type=OUTPUT_FOLDER, default="reflex-demo", show_default=True,
              help="Folder (created) for events.jsonl, errors.jsonl and the incident reports "
              "(reports/*.html, *.png).")  # fmt: skip
@influx_options_url_flag_only
@click.option("--local-influx", is_flag=True, help="Start the project's own InfluxDB build first.")
@click.option("--no-live", is_flag=True, help="No live view (for logs and CI).")
def command(
    scenario: str,
    seed: int,
    out_dir: Path,
    influx: InfluxOptions,
    local_influx: bool,
    no_live: bool,
) -> None:
    """Simulate a cluster with faults and watch Reflex localize them."""
    from reflex_localize.simulator import Simulation, load_scenario

    if "REFLEX_INFLUX_URL" in influx.flags and not local_influx:
        check_token(influx.require("reflex demo --influx-url"))  # before minutes of work
    console = Console()
    started = time.monotonic()
    sim = Simulation(load_scenario(scenario), seed=seed)
    with console.status("simulating the cluster"):
        windows = list(simulated_windows(sim, WINDOW_SECONDS))
    frames = [frame for _, window_frames in windows for frame in window_frames]
    console.print(
        f"[bold]{scenario}[/]: {len(sim.cluster.nodes)} nodes, "
        f"{sum(len(f) for f in frames):,} points over {sim.duration_s:.0f} simulated s"
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    server = None
    try:
        settings: InfluxSettings | None = None
        if local_influx:
            from reflex_localize.influx.local_server import InfluxServerError, start_influxdb

            with console.status("starting the project's InfluxDB"):
                try:
                    server = start_influxdb()
                except InfluxServerError as error:
                    raise click.ClickException(str(error)) from None
            settings = server.settings()
        elif "REFLEX_INFLUX_URL" in influx.flags:
            settings = influx.require("reflex demo --influx-url")
        with DemoView(sim.start_ns, sim.duration_s, live=not no_live) as view:
            if settings is not None:
                from reflex_localize.shell.demo_influx import run_through_influx

                with influx_refusals(settings.url):
                    result = run_through_influx(
                        settings, sim, frames, out_dir, view.on_output, console
                    )
            else:
                result = run_in_process(
                    MemorySource(windows, WINDOW_SECONDS),
                    window_seconds=WINDOW_SECONDS,
                    on_output=view.on_output,
                )
        _write_events(result, out_dir)
        _write_reports(result.events, frames, out_dir, console)
        console.print()  # a blank line between the live view and the table, on a file too
        console.print(
            summary_table(match_labels(sim.truth, result.events)[0], result.events, sim.start_ns)
        )
        if result.errors:
            console.print(reject_table(reject_counts(result.errors)))
        if settings is not None:
            with influx_refusals(settings.url):
                _after_influx(settings, out_dir, console)
    finally:
        if server is not None:
            server.close()
    console.print(f"done in {time.monotonic() - started:.1f} s; events, reports in {out_dir}/")


def _write_events(result: RunResult, out_dir: Path) -> None:
    (out_dir / "events.jsonl").write_text("".join(event_json(e) + "\n" for e in result.events))
    (out_dir / "errors.jsonl").write_text("".join(error_json(e) + "\n" for e in result.errors))


def _write_reports(
    events: list[LocalizationEvent], frames: list[Frame], out_dir: Path, console: Console
) -> None:
    from reflex_localize.shell.report_html import build_report
    from reflex_localize.shell.report_sources import FrameSource

    source = FrameSource(frames)
    with console.status("writing incident reports"):
        for event in events:
            build_report(event, source, out_dir / "reports")


def summary_table(
    matches: list[LabelMatch], events: list[LocalizationEvent], start_ns: int
) -> Table:
    """Each injected fault against what Reflex said, and every event nobody injected."""
    table = Table(title="Reflex vs the simulator's ground truth")
    for column in ("injected", "at (s)", "expected", "Reflex said", "after (s)", "verdict"):
        table.add_column(column, overflow="fold")
    matched = set()
    for m in matches:
        label, event = m.label, m.event
        expected = (
            f"{label.node} {label.component} {label.index}".strip()
            if label.expect == "hardware"
            else "no hardware fault"
        )
        said, after = "nothing", ""
        if event is not None:
            matched.add(id(event))
            top = event.top
            said = f"{top.node} {top.component} {top.index}" if top else "no hardware fault"
            after = f"{(event.time_ns - label.onset_ns) / 1e9:.0f}"
        verdict = "[green]correct[/]" if m.correct else "[red]wrong[/]"
        table.add_row(
            f"{label.fault_type} ({label.job})",
            f"{(label.onset_ns - start_ns) / 1e9:.0f}",
            expected,
            said,
            after,
            verdict,
        )
    for event in events:
        if id(event) not in matched:
            top = event.top
            table.add_row(
                "(nothing injected)",
                "",
                "",
                f"{event.trigger}: "
                f"{top.node + ' ' + top.component if top else 'no hardware fault'}",
                f"{(event.time_ns - start_ns) / 1e9:.0f}",
                "[yellow]extra event[/]",
            )
    return table


def _after_influx(settings: InfluxSettings, out_dir: Path, console: Console) -> None:
    from reflex_localize.dashboards.alerts import AlertSettings, install
    from reflex_localize.dashboards.generate import GRAFANA_DIR
    from reflex_localize.influx.connection import connect

    shutil.copytree(GRAFANA_DIR, out_dir / "grafana", dirs_exist_ok=True)
    with connect(dataclasses.replace(settings, timeout_s=30.0)) as client:
        alerts = AlertSettings(webhook_url="http://127.0.0.1:9/reflex-demo")
        report = install(client, settings.org, alerts)
    console.print(f"alert rules installed: {report}")
    console.print(f"Grafana provisioning copied to {out_dir}/grafana (see dashboards/README.md)")
    console.print("[bold]The events, in Flux:[/]\n" + EVENTS_FLUX)
