"""`reflex eval`: prints the evaluation table of Reflex against its baselines.

reflex eval                                   # the scenario library, seed 7
reflex eval --family launch-straggler         # one evaluation family, seeds 7, 8 and 9
reflex eval --family all --seed 7 --seed 11   # every family, these seeds
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from reflex_localize.flows.impact.model import ImpactModel
from reflex_localize.flows.judge.job_step import MODES
from reflex_localize.flows.judge.weights import load_weights
from reflex_localize.shell.eval_harness import (
    LabelMatch,
    PairRow,
    ScenarioResult,
    Summary,
    moving_pairs,
    run_family_scenario,
    run_scenario,
    summarize,
)
from reflex_localize.shell.progress import ProgressBar

FAMILY_SEEDS = (7, 8, 9)
# (column label, detector mode, JobConfig extras: refit weights, an impact model)
Run = tuple[str, str, dict[str, Any]]
LIBRARY_TITLE = "Reflex evaluation (simulated scenario library)"


def _fmt(value: float | None, unit: str = "") -> str:
    return (
        "n/a" if value is None else f"{value:.2f}{unit}" if unit != "%" else f"{100 * value:.0f}%"
    )


def render(summaries: list[Summary], title: str = LIBRARY_TITLE, family: bool = False) -> Table:
    table = Table(title=title)
    table.add_column("metric")
    for s in summaries:
        table.add_column(s.mode, justify="right")
    rows: list[tuple[str, Callable[[Summary], str]]] = [
        ("hardware faults", lambda s: str(s.faults)),
        ("top-1 accuracy", lambda s: _fmt(s.top1, "%")),
        ("top-3 accuracy", lambda s: _fmt(s.top3, "%")),
        ("event precision (lenient)", lambda s: f"{s.precision:.2f}"),
        ("event precision (strict)", lambda s: f"{s.strict_precision:.2f}"),
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
        ("  of them naming hardware", lambda s: _fmt(s.blaming_per_1k_node_hours)),
        ("imbalance not blamed", lambda s: s.imbalance_ok),
    ]
    triggers = sorted({t for s in summaries for t in s.false_per_1k_by_trigger})
    rows += [(f"  false / 1k node-h, {t}", _trigger_cell(t)) for t in triggers]
    if family:
        # Silence is "not blamed" but is not the "no hardware fault" finding the issue asks for.
        rows.append(("imbalance answered 'no hardware fault'", lambda s: s.imbalance_answered))
        # A wrong first answer ("no hardware fault", another part) that a later event fixed.
        rows.append(("wrong first, named later", lambda s: s.named_later))
    if any(s.crashed for s in summaries):
        rows.append(("runs crashed", lambda s: str(s.crashed)))
    classes = sorted({k for s in summaries for k in s.by_class})
    rows += [(f"top-1, {c} faults", _class_cell(c)) for c in classes]
    types = sorted({k for s in summaries for k in s.by_type})
    rows += [(f"  {t}", _type_cell(t)) for t in types]
    for label, cell in rows:
        table.add_row(label, *(cell(s) for s in summaries))
    return table


def _trigger_cell(trigger: str) -> Callable[[Summary], str]:
    return lambda s: _fmt(s.false_per_1k_by_trigger.get(trigger, 0.0))


def _class_cell(fault_class: str) -> Callable[[Summary], str]:
    return lambda s: _fmt(s.by_class.get(fault_class), "%")


def _type_cell(fault_type: str) -> Callable[[Summary], str]:
    return lambda s: s.by_type.get(fault_type, "-")


def _expected(match: LabelMatch) -> str:
    label = match.label
    if label.expect == "hardware":
        return " ".join(part for part in (label.node, label.component, label.index) if part)
    return f"no hardware fault ({label.fault_type})"


def _answer(match: LabelMatch) -> str:
    if match.event is None:
        return "no event"
    if not match.event.suspects:
        return "no hardware fault"
    top = match.event.suspects[0]
    return " ".join(part for part in (top.node, top.component, top.index) if part not in "-")


def _verdict(match: LabelMatch) -> str:
    if match.label.expect != "hardware":
        return "blamed hardware" if not match.correct else "answered" if match.event else "silent"
    return "hit" if match.correct else "wrong suspect" if match.event else "miss"


def detail_rows(results: list[ScenarioResult]) -> list[dict[str, str]]:
    """One row per label of each run (one per benign run), the wrong answers first."""
    rows = []
    for r in results:
        common = {"scenario": r.scenario, "seed": str(r.seed), "false events": str(r.false_events)}
        for m in r.matches:
            ttl = (m.event.time_ns - m.label.onset_ns) / 1e9 if m.event else None
            verdict = f"crashed: {r.crashed}" if r.crashed else _verdict(m)
            rows.append({**common, "expected": _expected(m), "answer": _answer(m),
                         "verdict": verdict, "TTL s": _fmt(ttl)})  # fmt: skip
        if not r.matches:
            verdict = f"crashed: {r.crashed}" if r.crashed else (
                "ok" if not r.false_events else "false events")  # fmt: skip
            rows.append({**common, "expected": "nothing (benign)", "answer": "-",
                         "verdict": verdict, "TTL s": "-"})  # fmt: skip
    right = ("ok", "hit", "answered")
    rows.sort(key=lambda row: (row["verdict"] in right, row["scenario"], int(row["seed"])))
    return rows


def render_details(rows: list[dict[str, str]], title: str) -> Table:
    table = Table(title=title)
    columns = ("scenario", "seed", "expected", "answer", "verdict", "TTL s", "false events")
    for name in columns:
        table.add_column(name, justify="right" if name in ("seed", "TTL s") else "left")
    for row in rows:
        table.add_row(*(row[name] for name in columns))
    return table


@click.command()
@click.option("--scenarios", default="", help="Comma-separated names (default: the library).")
@click.option(
    "--family",
    default="",
    help="An evaluation family (simulator/scenarios/families), or 'all', instead of the library.",
)
@click.option("--modes", default=",".join(MODES), show_default=True)
@click.option(
    "--seed",
    "seeds",
    type=int,
    multiple=True,
    help="Seed, repeatable (default: 7; with --family: 7, 8 and 9).",
)
@click.option("--json-out", type=click.Path(path_type=Path), help="Also write the figures as JSON.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON, not tables.")
@click.option(
    "--weights",
    "weights_path",
    type=click.Path(exists=True, path_type=Path),
    help="Also evaluate Reflex with weights refit by `reflex fit`.",
)
@click.option(
    "--impact-model",
    "impact_path",
    type=click.Path(exists=True, path_type=Path),
    help="Also evaluate Reflex with a compound-impact model from `reflex fit-impact`.",
)
def command(
    scenarios: str,
    family: str,
    modes: str,
    seeds: tuple[int, ...],
    json_out: Path | None,
    weights_path: Path | None,
    impact_path: Path | None,
    as_json: bool,
) -> None:
    """Run the scenario library (or an evaluation family) through Reflex and its baselines;
    print the table."""
    runs: list[Run] = [(m, m, {}) for m in modes.split(",") if m]
    if weights_path is not None:
        runs.append(("reflex (refit)", "reflex", {"weights": load_weights(weights_path)}))
    if impact_path is not None:
        runs.append(("reflex + impact", "reflex", {"impact": ImpactModel.load(impact_path)}))
    if family and scenarios:
        raise click.UsageError("give --scenarios or --family, not both")
    if family:
        _families(family, runs, seeds or FAMILY_SEEDS, json_out, as_json)
        return
    from reflex_localize.simulator import scenario_names

    names = [n for n in scenarios.split(",") if n] or list(scenario_names())
    summaries = []
    with ProgressBar(len(runs) * len(names) * len(seeds or (7,)), "eval") as bar:
        for label, mode, extra in runs:
            results = []
            for name in names:
                for seed in seeds or (7,):
                    with bar.step(f"{label}: {name}"):
                        results.append(run_scenario(name, mode, seed, **extra))
            summary = summarize(mode, results)
            summary.mode = label
            summaries.append(summary)
    figures = json.dumps([asdict(s) for s in summaries], indent=2)
    if as_json:
        click.echo(figures)
    else:
        Console().print(render(summaries))
    if json_out:
        json_out.write_text(figures)


def _families(
    family: str,
    runs: list[Run],
    seeds: tuple[int, ...],
    json_out: Path | None,
    as_json: bool = False,
) -> None:
    """Per family: the table of every mode, then each run of the first mode, misses first."""
    from reflex_localize.simulator import family_names, family_scenarios

    try:
        names = family_names() if family == "all" else [family.replace("-", "_")]
        paths = {name: family_scenarios(name) for name in names}
    except KeyError as error:
        raise click.ClickException(str(error.args[0])) from None
    # JSON replaces the tables on stdout: a quiet console swallows them.
    console = Console(quiet=as_json)
    document: dict[str, dict] = {}
    total = len(runs) * len(seeds) * sum(len(paths[name]) for name in names)
    with ProgressBar(total, "eval") as bar:
        for name in names:
            summaries, by_mode, pairs = _run_family(name, paths[name], runs, seeds, bar)
            rows = by_mode[runs[0][0]]
            title = (
                f"Reflex evaluation: family {name} ({len(paths[name])} scenarios, seeds {seeds})"
            )
            console.print(render(summaries, title, family=True))
            console.print(render_details(rows, f"{name}: every run of {runs[0][0]}, wrong first"))
            if pairs:
                console.print(
                    render_pairs(pairs, f"{name}: job B with the node's history vs without")
                )
            # Every mode's runs, not the first's alone: what a mode gained or lost, run by run.
            document[name] = {"summaries": [asdict(s) for s in summaries], "runs": rows,
                              "runs_by_mode": by_mode,
                              "pairs": [asdict(p) for p in pairs]}  # fmt: skip
    if as_json:
        click.echo(json.dumps(document, indent=2))
    if json_out:
        json_out.write_text(json.dumps(document, indent=2))


def render_pairs(pairs: list[PairRow], title: str) -> Table:
    """Per moving-node pair and mode: job B's time to localize and top-1, with and without the
    history of job A, and a last row per mode with the medians and the count of each."""
    table = Table(title=title)
    columns = ("scenario", "seed", "mode", "fault in job B", "TTL with history s",
               "TTL clean history s", "top-1 with / without", "sooner with history")  # fmt: skip
    for column in columns:
        table.add_column(column)
    for pair in pairs:
        table.add_row(pair.scenario, str(pair.seed), pair.mode, pair.fault,
                      _fmt(pair.ttl_history_s), _fmt(pair.ttl_clean_s),
                      f"{_yes(pair.top1_history)} / {_yes(pair.top1_clean)}",
                      _sooner(pair))  # fmt: skip
    for mode in dict.fromkeys(p.mode for p in pairs):
        mine = [p for p in pairs if p.mode == mode]
        table.add_row("all pairs", "-", mode, f"{len(mine)} pairs",
                      _fmt(_median([p.ttl_history_s for p in mine])),
                      _fmt(_median([p.ttl_clean_s for p in mine])),
                      f"{sum(p.top1_history for p in mine)} / {sum(p.top1_clean for p in mine)}",
                      f"{sum(_sooner(p) == 'yes' for p in mine)} sooner, "
                      f"{sum(_sooner(p) == 'later' for p in mine)} later")  # fmt: skip
    return table


def _yes(flag: bool) -> str:
    return "right" if flag else "wrong"


def _sooner(pair: PairRow) -> str:
    with_history, clean = pair.ttl_history_s, pair.ttl_clean_s
    if with_history is None and clean is None:
        return "neither"
    if with_history is None or clean is None:
        return "only with history" if clean is None else "only without"
    return "yes" if with_history < clean else "later" if with_history > clean else "same"


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _run_family(
    name: str,
    paths: list[Path],
    runs: list[Run],
    seeds: tuple[int, ...],
    bar: ProgressBar,
) -> tuple[list[Summary], dict[str, list[dict[str, str]]], list[PairRow]]:
    from reflex_localize.simulator import load_scenario

    controls = {}
    for path in paths:
        scenario = load_scenario(path)
        if scenario.evaluation.control_of:
            controls[scenario.name] = (
                scenario.evaluation.control_of,
                scenario.evaluation.measured_job,
            )
    summaries: list[Summary] = []
    by_mode: dict[str, list[dict[str, str]]] = {}
    every: list[ScenarioResult] = []
    for label, mode, extra in runs:
        results = []
        for path in paths:
            for seed in seeds:
                with bar.step(f"{name} / {label}: {path.stem}, seed {seed}"):
                    results.append(run_family_scenario(path, mode, seed, **extra))
        summary = summarize(mode, results)
        summary.mode = label
        summaries.append(summary)
        by_mode[label] = detail_rows(results)
        for result in results:
            result.mode = label
        every += results
    return summaries, by_mode, moving_pairs(every, controls)
