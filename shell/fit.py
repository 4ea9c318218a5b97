"""`reflex fit`: refit evidence weights from labelled incidents; the flow then uses them."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.judge.job_step import default_weights
from reflex_localize.flows.judge.weights import FEATURES, save_weights
from reflex_localize.shell.cli_checks import (
    INPUT_FILE,
    NOT_NEGATIVE,
    OUTPUT_FILE,
    read_json_lines,
    scenario_problem,
)
from reflex_localize.shell.fit_harness import (
    TrainingSet,
    examples_from_feedback,
    examples_from_scenario,
    fit_weights,
)
from reflex_localize.shell.progress import ProgressBar


def _scenarios(ctx: click.Context, param: click.Parameter, value: str) -> list[str]:
    """The named scenarios, each checked (default: every fault scenario of the library)."""
    from reflex_localize.simulator import scenario_names

    names = [name for name in value.split(",") if name]
    for name in names:
        problem = scenario_problem(name)
        if problem:
            raise click.BadParameter(problem)
    return names or [name for name in scenario_names() if name.startswith("fault_")]


def _verdict(line: str) -> tuple[str, str]:
    row = json.loads(line)
    return str(row["event_id"]), str(row["verdict"])


@click.command()
@click.option(
    "--scenarios",
    default="",
    callback=_scenarios,
    help="Comma-separated simulator scenarios (default: every fault scenario of the library).",
)
@click.option(
    "--seed",
    type=NOT_NEGATIVE,
    default=11,
    show_default=True,
    help="Seed for the training runs (eval uses 7: keep them apart).",
)
@click.option(
    "--events",
    type=INPUT_FILE,
    help="events.jsonl of past events that operators judged.",
)
@click.option(
    "--feedback",
    type=INPUT_FILE,
    help='JSONL of {"event_id": ..., "verdict": "confirmed"|"rejected"}.',
)
@click.option(
    "--out",
    "out_path",
    default="reflex-weights.json",
    show_default=True,
    type=OUTPUT_FILE,
)
@click.option("--json", "as_json", is_flag=True, help="Print the weights as JSON, not a table.")
def command(
    scenarios: list[str],
    seed: int,
    events: Path | None,
    feedback: Path | None,
    out_path: Path,
    as_json: bool,
) -> None:
    """Fit evidence weights; use them with --weights (or REFLEX_WEIGHTS) in the flow."""
    judged_events: list[LocalizationEvent] = []
    verdicts: dict[str, str] = {}
    if events and feedback:  # read first: a bad line must not wait for the runs
        verdicts = dict(read_json_lines(feedback, "--feedback", "a verdict", _verdict))
        judged_events = read_json_lines(events, "--events", "an event", LocalizationEvent.from_json)
    data = TrainingSet()
    with ProgressBar(len(scenarios), "collecting evidence") as bar:
        for name in scenarios:
            with bar.step(name):
                examples_from_scenario(name, seed, data)
    judged = examples_from_feedback(judged_events, verdicts, data)
    try:
        weights = fit_weights(data)
    except ValueError as error:  # no faulty (or no healthy) example among these runs
        raise click.BadParameter(
            f"{','.join(scenarios)}: {error}", param_hint="'--scenarios'"
        ) from None
    save_weights(
        weights,
        out_path,
        {
            "scenarios": scenarios,
            "seed": seed,
            "judged_events": judged,
            "examples": len(data.labels),
            "positives": int(sum(data.labels)),
        },
    )
    defaults = next(iter(default_weights().values()))
    if as_json:
        rows = [
            {"signal": name, "default": defaults.get(name, 1.0), "fitted": weights[name]}
            for name in FEATURES
        ]
        document = {"examples": len(data.labels), "faulty": int(sum(data.labels)),
                    "written_to": str(out_path), "weights": rows}  # fmt: skip
        click.echo(json.dumps(document, indent=2))
        return
    table = Table(
        title=f"weights from {len(data.labels)} examples "
        f"({sum(data.labels)} faulty), written to {out_path}"
    )
    for column in ("signal", "default", "fitted"):
        table.add_column(column)
    for name in FEATURES:
        table.add_row(name, f"{defaults.get(name, 1.0):.2f}", f"{weights[name]:.2f}")
    Console().print(table)
