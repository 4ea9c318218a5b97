"""`reflex localize`: runs the flow over a scenario or a line-protocol replay file."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.io.one_cluster import UNNAMED, first_cluster
from reflex_localize.flows.io.sinks import event_json
from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.judge.job_step import JobConfig
from reflex_localize.flows.judge.weights import load_weights
from reflex_localize.flows.messages import ErrorRecord
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.cli_checks import (
    INPUT_FILE,
    NOT_NEGATIVE,
    OUTPUT_FILE,
    POSITIVE_SECONDS,
    REPLAY_FILE,
    SCENARIO,
    short_reason,
)
from reflex_localize.shell.flow_cluster import scenario_cluster
from reflex_localize.shell.reject_summary import reject_counts, reject_table, run_document
from reflex_localize.shell.simulated_source import SimulatorSource


@click.command()
@click.option("--scenario", type=SCENARIO, help="Simulated scenario name from the library.")
@click.option("--replay", type=REPLAY_FILE, help="A line-protocol file to replay.")
@click.option("--seed", type=NOT_NEGATIVE, default=7, show_default=True)
@click.option("--window", type=POSITIVE_SECONDS, default=10.0, show_default=True,
              help="Window length in seconds.")  # fmt: skip
@click.option("--events-out", type=OUTPUT_FILE, help="Write events as JSONL.")
@click.option("--weights", "weights_path", type=INPUT_FILE,
              help="Evidence weights refit by `reflex fit`.")  # fmt: skip
@click.option("--cluster",
              help="The cluster to read; lines of others are counted and told once. "
                   "Default: the first the replay or scenario shows.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True,
              help="Print the events and the rejects as one JSON document.")  # fmt: skip
def command(
    scenario: str | None,
    replay: Path | None,
    seed: int,
    window: float,
    events_out: Path | None,
    weights_path: Path | None,
    cluster: str | None,
    as_json: bool,
) -> None:
    """Localize faults in a scenario or a replayed capture; print the events."""
    if bool(scenario) == bool(replay):
        raise click.UsageError("give exactly one of --scenario or --replay")
    if scenario:
        source: SimulatorSource | LineProtocolSource = SimulatorSource(scenario, seed, 1, window)
        cluster = cluster or scenario_cluster(scenario)
    else:
        assert replay is not None
        source = LineProtocolSource(replay, 1, window)
        cluster = cluster or first_cluster(replay)
    config = JobConfig(window_seconds=window, cluster=cluster or UNNAMED)
    if weights_path is not None:
        config.weights = _weights(weights_path)
    result = run_in_process(source, window_seconds=window, job_config=config, cluster=cluster)
    if as_json:
        click.echo(json.dumps(run_document(result.events, reject_counts(result.errors)), indent=2))
    else:
        _print(result.events, result.errors)
    if events_out:
        events_out.write_text("".join(event_json(e) + "\n" for e in result.events))


def _print(events: list[LocalizationEvent], errors: list[ErrorRecord]) -> None:
    console = Console()
    for event in events:
        console.print(f"[bold]{event.trigger}[/] {event.job}: {event.summary} -> {event.action}")
    if errors:
        console.print(reject_table(reject_counts(errors)))


def _weights(path: Path) -> dict[str, dict[str, float]]:
    try:
        return load_weights(path)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise click.BadParameter(
            f"{path}: not weights from `reflex fit`: {short_reason(error)}",
            param_hint="'--weights'",
        ) from None
