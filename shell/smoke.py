"""``reflex smoke``: proves the stack end to end on this machine.

Starts a throwaway InfluxDB, writes a few points of every declared measurement through the
Writer, reads them back with Flux, and says OK only when every one came back.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import click

from reflex_localize.influx.local_server import InfluxServerError, start_influxdb
from reflex_localize.influx.writer import Writer
from reflex_localize.shell.cli_checks import INFLUXD
from reflex_localize.shell.sample_points import sample_points

# Flux's range() stops at now() by default; the sample points sit in 2023, this covers them all.
_FLUX = """
from(bucket: "{bucket}")
  |> range(start: 0, stop: 2262-04-11T23:47:16.854775807Z)
  |> keep(columns: ["_measurement", "_time"])
  |> group()
"""


def run_smoke(binary: Path | None = None) -> dict[str, tuple[int, int]]:
    """Returns {measurement: (points written, points read back)}."""
    points = sample_points(per_measurement=3)
    written = Counter(point.measurement for point in points)
    with (
        start_influxdb(binary) as server,
        tempfile.TemporaryDirectory(prefix="reflex-smoke-spool-") as spool,
    ):
        with Writer(server.url, server.token, server.org, server.bucket, Path(spool)) as writer:
            writer.write(points)
        if writer.stats.rejected:
            raise click.ClickException(f"points rejected: {writer.stats.rejected_by_reason}")
        rows = server.query_rows(_FLUX.format(bucket=server.bucket))
    # One row per stored field; a point is one (measurement, time) here.
    stored = {(row["_measurement"], row["_time"]) for row in rows}
    read = Counter(measurement for measurement, _ in stored)
    return {name: (count, read.get(name, 0)) for name, count in sorted(written.items())}


@click.command("smoke")
@click.option("--binary", type=INFLUXD, default=None)
def command(binary: Path | None) -> None:
    """Start InfluxDB, write every measurement family, read it back with Flux."""
    try:
        results = run_smoke(binary)
    except InfluxServerError as error:
        raise click.ClickException(str(error)) from None
    for name, (written, read) in results.items():
        click.echo(f"{name:<18} written {written:>3}  read back {read:>3}")
    if any(written != read for written, read in results.values()):
        raise click.ClickException("some points did not come back")
    click.echo(f"OK: {len(results)} measurements round-tripped through InfluxDB")
