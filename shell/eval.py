"""`reflex eval`: prints the evaluation table of Reflex against its baselines."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from reflex_localize.flows.job_step import MODES
from reflex_localize.flows.weights import load_weights
from reflex_localize.shell.eval_harness import Summary, run_scenario, summarize


def _fmt(value: float | None, unit: str = "") -> str:
    return (
        "n/a" if value is None else f"{value:.2f}{unit}" if unit != "%" else f"{100 * value:.0f}%"
    )


def render(summaries: list[Summary]) -> Table:
    table = Table(title="Reflex evaluation (simulated scenario library)")
    table.add_column("metric")
    for s in summaries:
        table.add_column(s.mode, justify="right")
    rows: list[tuple[str, Callable[[Summary], str]]] = [
        ("hardware faults", lambda s: str(s.faults)),
        ("top-1 accuracy", lambda s: _fmt(s.top1, "%")),
        ("top-3 accuracy", lambda s: _fmt(s.top3, "%")),
        ("event precision", lambda s: f"{s.precision:.2f}"),
        ("event recall", lambda s: f"{s.recall:.2f}"),
        ("event F1", lambda s: f"{s.f1:.2f}"),
        (
            "TTL explicit p50 / p95 (s)",
            lambda s: f"{_fmt(s.ttl_explicit_p50)} / {_fmt(s.ttl_explicit_p95)}",
        ),
        (
            "TTL implicit p50 / p95 (s)",
            lambda s: f"{_fmt(s.ttl_implicit_p50)} / {_fmt(s.ttl_implicit_p95)}",
        ),
        ("false events / 1k node-h (benign)", lambda s: _fmt(s.false_per_1k_node_hours)),
        ("imbalance not blamed", lambda s: s.imbalance_ok),
    ]
    classes = sorted({k for s in summaries for k in s.by_class})
    rows += [(f"top-1, {c} faults", _class_cell(c)) for c in classes]
    types = sorted({k for s in summaries for k in s.by_type})
    rows += [(f"  {t}", _type_cell(t)) for t in types]
    for label, cell in rows:
        table.add_row(label, *(cell(s) for s in summaries))
    return table


def _class_cell(fault_class: str) -> Callable[[Summary], str]:
    return lambda s: _fmt(s.by_class.get(fault_class), "%")


def _type_cell(fault_type: str) -> Callable[[Summary], str]:
    return lambda s: s.by_type.get(fault_type, "-")


@click.command()
@click.option("--scenarios", default="", help="Comma-separated names (default: the library).")
@click.option("--modes", default=",".join(MODES), show_default=True)
@click.option("--seed", default=7, show_default=True)
@click.option("--json-out", type=click.Path(path_type=Path), help="Also write the figures as JSON.")
@click.option(
    "--weights",
    "weights_path",
    type=click.Path(exists=True, path_type=Path),
    help="Also evaluate Reflex with weights refit by `reflex fit`.",
)
def command(
    scenarios: str, modes: str, seed: int, json_out: Path | None, weights_path: Path | None
) -> None:
    """Run the scenario library through Reflex and its baselines; print the table."""
    from reflex_localize.simulator import scenario_names

    names = [n for n in scenarios.split(",") if n] or list(scenario_names())
    console = Console()
    runs: list[tuple[str, str, dict | None]] = [(m, m, None) for m in modes.split(",") if m]
    if weights_path is not None:
        runs.append(("reflex (refit)", "reflex", load_weights(weights_path)))
    summaries = []
    for label, mode, weights in runs:
        results = []
        for name in names:
            with console.status(f"{label}: {name}"):
                results.append(run_scenario(name, mode, seed, weights=weights))
        summary = summarize(mode, results)
        summary.mode = label
        summaries.append(summary)
    console.print(render(summaries))
    if json_out:
        json_out.write_text(json.dumps([asdict(s) for s in summaries], indent=2))
