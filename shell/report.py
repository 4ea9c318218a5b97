"""``reflex report``: rebuilds the incident report of any past event.

reflex report 023e0d1edfbce5f7 --events out/events.jsonl --replay incident.lp --out reports/
reflex report 023e0d1edfbce5f7 --events out/events.jsonl --influx-url https://influx:8086 \\
    --token-file ~/.reflex/token --org reflex --bucket telemetry --out reports/

InfluxDB is reached with the options every command shares (:mod:`shell.influx_options`); the
token comes from ``--token-file`` (mode 600) or ``REFLEX_INFLUX_TOKEN``, never from the
command line, and appears in no output.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.shell.cli_checks import (
    INPUT_FILE,
    OUTPUT_FOLDER,
    POSITIVE_SECONDS,
    REPLAY_FILE,
    influx_refusals,
    read_json_lines,
    short_reason,
)
from reflex_localize.shell.influx_options import InfluxOptions, influx_options
from reflex_localize.shell.report_html import build_report
from reflex_localize.shell.report_sources import InfluxSource, ReplaySource, TimelineSource


@click.command(name="report")
@click.argument("event_id")
@click.option("--events", "events_path", type=INPUT_FILE, required=True,
              help="events.jsonl written by the flow.")  # fmt: skip
@click.option("--replay", type=REPLAY_FILE,
              help="Line-protocol file holding the telemetry (else: from InfluxDB).")  # fmt: skip
@influx_options
@click.option("--results-bucket", default="reflex", show_default=True,
              help="Bucket of the flow's outputs (its stored baselines).")  # fmt: skip
@click.option("--timeout", "timeout_s", type=POSITIVE_SECONDS, default=30.0, show_default=True,
              help="Seconds allowed per InfluxDB query.")  # fmt: skip
@click.option("--out", "out_dir", type=OUTPUT_FOLDER, default=Path("reports"),
              show_default=True)  # fmt: skip
def command(
    event_id: str,
    events_path: Path,
    replay: Path | None,
    influx: InfluxOptions,
    results_bucket: str,
    timeout_s: float,
    out_dir: Path,
) -> None:
    """Rebuild the report of EVENT_ID (or a unique prefix of it) as HTML and PNG."""
    events = read_json_lines(events_path, "--events", "an event", LocalizationEvent.from_json)
    event = find_event(events, event_id)
    source = _source(replay, influx, results_bucket, timeout_s)
    try:
        with influx_refusals(source.settings.url if isinstance(source, InfluxSource) else ""):
            html_path, png_path = build_report(event, source, out_dir)
    except OSError as error:  # the replay file, or the report's own files
        where = error.filename or out_dir
        raise click.ClickException(f"{where}: {short_reason(error)}") from None
    click.echo(f"{html_path}\n{png_path}")


def find_event(events: list[LocalizationEvent], wanted: str) -> LocalizationEvent:
    matches = {e.event_id: e for e in events if e.event_id.startswith(wanted)}
    if wanted in matches:
        return matches[wanted]
    if len(matches) == 1:
        return next(iter(matches.values()))
    if not matches:
        raise click.ClickException(f"no event {wanted!r} among {len(events)} events")
    raise click.ClickException(f"{wanted!r} matches {len(matches)} events; give more of the id")


def _source(
    replay: Path | None, influx: InfluxOptions, results_bucket: str, timeout_s: float
) -> TimelineSource:
    if replay is not None:
        if "REFLEX_INFLUX_URL" in influx.flags:
            raise click.UsageError("give exactly one of --replay and --influx-url, not both")
        return ReplaySource(replay)
    if not influx.settings().url:
        raise click.UsageError(
            "give exactly one of --replay and --influx-url (or REFLEX_INFLUX_URL)"
        )
    settings = influx.require("reading the telemetry from InfluxDB")
    return InfluxSource(
        dataclasses.replace(settings, timeout_s=timeout_s), results_bucket=results_bucket
    )
