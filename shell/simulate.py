"""``reflex simulate``: a scenario's telemetry as line protocol, and its ground truth.

reflex simulate demo --seed 7 --out demo.lp --truth demo.truth.json
reflex simulate mixture --scale 10000 --out big.lp
reflex simulate --list
reflex simulate demo --influx-url http://127.0.0.1:8086 --token-file ~/.reflex/token

Only ``--influx-url`` sends the telemetry to InfluxDB: a ``REFLEX_INFLUX_URL`` in the
environment (an agent's, say) never sends simulated data to a production database; the token,
org, bucket and TLS settings come from the options every command shares.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from pathlib import Path
from typing import TextIO

import click

from reflex_localize.influx.writer import Writer
from reflex_localize.schemas.frame import Frame
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.shell.cli_checks import (
    AT_LEAST_ONE,
    NOT_NEGATIVE,
    OUTPUT_FILE,
    SCENARIO,
    check_output,
    check_token,
    influx_refusals,
)
from reflex_localize.shell.influx_options import InfluxOptions, influx_options
from reflex_localize.shell.progress import ProgressBar
from reflex_localize.simulator.faults import fault_types
from reflex_localize.simulator.scenario import load_scenario, scale_scenario, scenario_names
from reflex_localize.simulator.simulation import Simulation

MAX_GPUS = 10_000


@click.command(name="simulate")
@click.argument("scenario", type=SCENARIO, required=False)
@click.option("--seed", type=NOT_NEGATIVE, default=0, show_default=True,
              help="Seed: same seed, same telemetry.")  # fmt: skip
@click.option("--scale", type=click.IntRange(1, MAX_GPUS), help="Resize the cluster to ~GPUS GPUs.")
@click.option("--out", type=OUTPUT_FILE, help="Line-protocol file (default: stdout).")
@click.option("--truth", type=OUTPUT_FILE, help="Ground-truth JSON label file.")
@influx_options
@click.option("--spool-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path(".reflex-spool/simulate"), show_default=True,
              help="Where undelivered batches wait for InfluxDB.")  # fmt: skip
@click.option("--chunk-seconds", default=10, show_default=True, type=AT_LEAST_ONE,
              help="Simulated seconds generated per batch.")  # fmt: skip
@click.option("--list", "list_only", is_flag=True, help="List scenarios and fault types.")
def command(
    scenario: str | None,
    seed: int,
    scale: int | None,
    out: Path | None,
    truth: Path | None,
    influx: InfluxOptions,
    spool_dir: Path,
    chunk_seconds: int,
    list_only: bool,
) -> None:
    """Simulate SCENARIO (a library name or a .toml path) and write its telemetry."""
    if list_only or scenario is None:
        click.echo("scenarios:   " + " ".join(scenario_names()))
        click.echo("fault types: " + " ".join(fault_types()))
        return
    settings = None
    if "REFLEX_INFLUX_URL" in influx.flags:
        check_output(spool_dir, "--spool-dir", folder=True)
        settings = influx.require("reflex simulate --influx-url")
        check_token(settings)
    unscaled = load_scenario(scenario)  # SCENARIO has loaded it once already
    loaded = scale_scenario(unscaled, scale) if scale else unscaled
    try:
        sim = Simulation(loaded, seed=seed)
    except ValueError as error:  # the scaled cluster cannot hold the scenario's jobs
        if not scale:
            raise
        raise click.BadParameter(
            f"{scale} GPUs cannot hold {scenario}'s jobs ({error}); "
            f"it has {unscaled.nodes * unscaled.gpus_per_node} GPUs unscaled",
            param_hint="'--scale'",
        ) from None
    if truth:
        sim.write_truth(truth)
    started = time.perf_counter()
    if settings is not None:
        with influx_refusals(settings.url):
            points = _to_influx(sim, chunk_seconds, out, Writer.from_settings(settings, spool_dir))
    else:
        with out.open("w") if out else _stdout() as sink:
            points = write_lines(sim, sink, chunk_seconds)
    elapsed = time.perf_counter() - started
    click.echo(
        f"{loaded.name}: {len(sim.cluster.nodes)} nodes, {sim.cluster.gpu_count} GPUs, "
        f"{sim.duration_s:.0f} s simulated, {points} points in {elapsed:.1f} s "
        f"({points / max(elapsed, 1e-9):,.0f} points/s), {len(sim.truth)} truth labels",
        err=True,
    )


def _to_influx(sim: Simulation, chunk_seconds: int, out: Path | None, writer: Writer) -> int:
    """Writes to InfluxDB, and to ``out`` too when given."""
    points = 0
    chunks = math.ceil(sim.duration_s / chunk_seconds)
    with (
        writer,
        out.open("w") if out else contextlib.nullcontext() as sink,
        ProgressBar(chunks, f"to InfluxDB, {chunk_seconds} s chunks") as bar,
    ):
        for chunk in sim.chunks(seconds=float(chunk_seconds)):
            writer.write_frames(chunk)
            points += sum(len(frame) for frame in chunk)
            if sink is not None:
                _write_chunk(chunk, sink)
            bar.advance()
    if writer.stats.rejected or not writer.spool_empty:
        click.echo(f"influx: {writer.stats}", err=True)
    return points


def write_lines(sim: Simulation, sink: TextIO, chunk_seconds: int) -> int:
    return sum(_write_chunk(chunk, sink) for chunk in sim.chunks(seconds=float(chunk_seconds)))


def _write_chunk(chunk: list[Frame], sink: TextIO) -> int:
    """Writes a chunk's frames as line protocol; returns how many lines."""
    points = 0
    for frame in chunk:
        lines = encode_frame(frame)
        points += len(lines)
        sink.write("".join(line + "\n" for line in lines))
    return points


class _stdout:
    """stdout as a context manager that is not closed on exit."""

    def __enter__(self) -> TextIO:
        return sys.stdout

    def __exit__(self, *exc: object) -> None:
        sys.stdout.flush()
