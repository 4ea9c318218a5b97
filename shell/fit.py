"""`reflex fit`: refit evidence weights from labelled incidents; the flow then uses them."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from reflex_localize.flows.job_step import default_weights
from reflex_localize.flows.sinks import read_events
from reflex_localize.flows.weights import FEATURES, save_weights
from reflex_localize.shell.fit_harness import (
    TrainingSet,
    examples_from_feedback,
    examples_from_scenario,
    fit_weights,
)


@click.command()
@click.option(
    "--scenarios",
    default="",
    help="Comma-separated simulator scenarios (default: every fault scenario of the library).",
)
@click.option(
    "--seed",
    default=11,
    show_default=True,
    help="Seed for the training runs (eval uses 7: keep them apart).",
)
@click.option(
    "--events",
    type=click.Path(exists=True, path_type=Path),
    help="events.jsonl of past events that operators judged.",
)
@click.option(
    "--feedback",
    type=click.Path(exists=True, path_type=Path),
    help='JSONL of {"event_id": ..., "verdict": "confirmed"|"rejected"}.',
)
@click.option(
    "--out",
    "out_path",
    default="reflex-weights.json",
    show_default=True,
    type=click.Path(path_type=Path),
)
def command(
    scenarios: str, seed: int, events: Path | None, feedback: Path | None, out_path: Path
) -> None:
    """Fit evidence weights; use them with --weights (or REFLEX_WEIGHTS) in the flow."""
    from reflex_localize.simulator import scenario_names

    names = [n for n in scenarios.split(",") if n] or [
        n for n in scenario_names() if n.startswith("fault_")
    ]
    data = TrainingSet()
    console = Console()
    for name in names:
        with console.status(f"collecting evidence: {name}"):
            examples_from_scenario(name, seed, data)
    judged = 0
    if events and feedback:
        verdicts = {
            row["event_id"]: row["verdict"]
            for row in (json.loads(line) for line in feedback.read_text().splitlines() if line)
        }
        judged = examples_from_feedback(read_events(events), verdicts, data)
    weights = fit_weights(data)
    save_weights(
        weights,
        out_path,
        {
            "scenarios": names,
            "seed": seed,
            "judged_events": judged,
            "examples": len(data.labels),
            "positives": int(sum(data.labels)),
        },
    )
    defaults = next(iter(default_weights().values()))
    table = Table(
        title=f"weights from {len(data.labels)} examples "
        f"({sum(data.labels)} faulty), written to {out_path}"
    )
    for column in ("signal", "default", "fitted"):
        table.add_column(column)
    for name in FEATURES:
        table.add_row(name, f"{defaults.get(name, 1.0):.2f}", f"{weights[name]:.2f}")
    console.print(table)
