"""``reflex fit-impact``: learn the compound impact model from the fleet's own history.

No labels: each rank's slowdown against its stage peers is regressed on its parts' anomaly
indicators (see :mod:`flows.impact_model`). The history is the rows the live flow kept
(``reflex flow --impact-rows DIR``: a week of 1,024 GPUs in one to two minutes and 280 MiB,
streamed rather than held; the way to run it on a schedule), or InfluxDB (a replay of a past
range the way the flow reads it: hours for a day of 1,024 GPUs), or, for a try-out, simulated
scenarios. The model file is versioned by its content and replaced by rename; the flow takes
it with ``reflex flow --impact-model FILE`` (or ``REFLEX_IMPACT_MODEL``) and looks at it again
once a minute.

    reflex fit-impact --influx-url http://influx:8086 --org reflex --token-file ro.token \\
        --start 2026-11-23T00:00:00Z --stop 2026-11-30T00:00:00Z --out impact.json
    reflex fit-impact --rows /var/lib/reflex/flow/impact-rows --last 7d --out impact.json
    reflex fit-impact --scenarios fault_compound_quirky,benign_fleet --out impact.json
    reflex fit-impact --family node_compound --seed 11 --out node_compound.json
"""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime
from pathlib import Path

import click

from reflex_localize.flows.impact.fit import RowPasses, fit_impact_passes
from reflex_localize.flows.impact.model import ImpactModel
from reflex_localize.flows.impact.rows_log import row_passes
from reflex_localize.flows.judge.job_step import JobConfig
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.cli_checks import DURATION, NOT_NEGATIVE, OUTPUT_FILE, scenario_problem
from reflex_localize.shell.influx_options import InfluxOptions, influx_options

Rows = list[tuple[dict[str, float], float]]


def rows_from_scenarios(names: list[str], seed: int) -> Rows:
    from reflex_localize.shell.simulated_source import SimulatorSource

    rows: Rows = []
    config = JobConfig(impact_recorder=lambda job, end, got: rows.extend(got))
    for name in names:
        run_in_process(SimulatorSource(name, seed, 1, 10.0), job_config=config)
    return rows


def rows_from_influx(influx: InfluxOptions, start_ns: int, stop_ns: int) -> Rows:
    from reflex_localize.flows.io.influx_source import QUERY_TIMEOUT_S, InfluxSource

    settings = influx.require("reading history from InfluxDB")
    source = InfluxSource(
        dataclasses.replace(settings, timeout_s=max(settings.timeout_s, QUERY_TIMEOUT_S)),
        n_shards=1,
        window_seconds=10.0,
        lag_seconds=0.0,
        start_ns=start_ns,
        stop_ns=stop_ns,
    )
    rows: Rows = []
    config = JobConfig(impact_recorder=lambda job, end, got: rows.extend(got))
    run_in_process(source, job_config=config)
    return rows


def in_hand(rows: Rows) -> RowPasses:
    """Passes over rows held in memory (simulated or read from InfluxDB), one rank-window each;
    the kept files are streamed instead (``row_passes``)."""
    return lambda: ((evidence, slowdown, 1.0) for evidence, slowdown in rows)


def _family_files(family: str) -> list[str]:
    """A family's scenario files: the history of the fleet it describes (each family is one)."""
    from reflex_localize.simulator import family_scenarios

    try:
        return [str(path) for path in family_scenarios(family.replace("-", "_"))]
    except KeyError as error:
        raise click.BadParameter(str(error.args[0]), param_hint="'--family'") from None


def _iso(time_ns: int) -> str:
    return datetime.fromtimestamp(time_ns / 1e9, UTC).isoformat(timespec="seconds")


def _instant(text: str | None, name: str) -> int | None:
    if text is None:
        return None
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1e9)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not an ISO time", param_hint=name) from None


@click.command()
@click.option("--scenarios", default="", help="Comma-separated simulated scenarios to learn from.")
@click.option("--family", default="", help="Or every scenario of an evaluation family (its fleet).")
@click.option("--seed", type=NOT_NEGATIVE, default=11, show_default=True)
@click.option("--start", help="InfluxDB history: first instant (ISO 8601, UTC).")
@click.option("--stop", help="InfluxDB history: last instant (ISO 8601, UTC).")
@click.option("--rows", "rows_dir", type=click.Path(file_okay=False, path_type=Path),
              help="History from the rows a flow kept (reflex flow --impact-rows DIR) instead "
                   "of InfluxDB (with --last or --start/--stop).")  # fmt: skip
@click.option("--last", type=DURATION,
              help="History: this span up to now (24h, 7d), for a schedule.")  # fmt: skip
@click.option("--out", "out_path", default="reflex-impact.json", show_default=True,
              type=OUTPUT_FILE)  # fmt: skip
@click.option("--keep-versions", is_flag=True,
              help="Also keep each model as OUT-VERSION.json beside OUT: the version an event "
                   "quotes can be read back.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the model as JSON.")
@influx_options
def command(
    scenarios: str,
    family: str,
    seed: int,
    start: str | None,
    stop: str | None,
    last: float | None,
    rows_dir: Path | None,
    out_path: Path,
    keep_versions: bool,
    as_json: bool,
    influx: InfluxOptions,
) -> None:
    """Learn how much each anomaly (and pair) slows a rank, without labels."""
    names = [n for n in scenarios.split(",") if n]
    if family:
        if names:
            raise click.UsageError("give --scenarios or --family, not both")
        names = _family_files(family)
    start_ns, stop_ns = _instant(start, "'--start'"), _instant(stop, "'--stop'")
    if last is not None:
        if start_ns is not None or stop_ns is not None:
            raise click.UsageError("give --last or --start/--stop, not both")
        stop_ns = time.time_ns()
        start_ns = stop_ns - int(last * 1e9)
        start, stop = _iso(start_ns), _iso(stop_ns)
    if names and rows_dir is not None:
        raise click.UsageError("give --scenarios/--family or --rows, not both")
    if bool(names) == (start_ns is not None):
        raise click.UsageError("give either --scenarios or --start/--stop or --last (history)")
    if names:
        for name in names:
            problem = scenario_problem(name)
            if problem:
                raise click.BadParameter(problem, param_hint="'--scenarios'")
        passes = in_hand(rows_from_scenarios(names, seed))
        provenance: dict = {
            "scenarios": names,
            "seed": seed,
            **({"family": family} if family else {}),
        }
    else:
        if stop_ns is None or start_ns is None or stop_ns <= start_ns:
            raise click.BadParameter("--stop must follow --start", param_hint="'--stop'")
        if rows_dir is not None:
            passes, unreadable = row_passes(rows_dir, start_ns, stop_ns)
            provenance = {"rows_dir": str(rows_dir), "start": start, "stop": stop}
            if unreadable:
                click.echo(f"{unreadable} line(s) of {rows_dir} could not be read: skipped")
                provenance["unreadable_lines"] = unreadable
        else:
            passes = in_hand(rows_from_influx(influx, start_ns, stop_ns))
            provenance = {"influx_start": start, "influx_stop": stop}
    try:
        provenance["fitted_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        model = fit_impact_passes(passes, provenance)
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    if keep_versions:
        model.save(out_path.with_name(f"{out_path.stem}-{model.version}{out_path.suffix}"))
    model.save(out_path)
    ranked = sorted(
        ((f, c) for f, c in zip(model.features, model.coefficients, strict=True) if c > 0),
        key=lambda fc: -fc[1],
    )
    if as_json:
        click.echo(json.dumps({"version": model.version, "written_to": str(out_path),
                               "provenance": model.provenance,
                               "coefficients": dict(ranked)}, indent=2))  # fmt: skip
        return
    click.echo(f"impact model {model.version} from {model.provenance['rows']} rank-windows "
               f"(R^2 {model.provenance['r2']}), written to {out_path}")  # fmt: skip
    for feature, coefficient in ranked[:15]:
        click.echo(f"  {feature:48s} {100 * coefficient:6.2f}% slower per unit")


def load_model(path: Path | None) -> ImpactModel | None:
    return None if path is None else ImpactModel.load(path)
