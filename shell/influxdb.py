"""``reflex influxdb start``: a local InfluxDB 2.x in the foreground, for a local stack."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

from reflex_localize.influx.local_server import InfluxServerError, start_influxdb
from reflex_localize.shell.cli_checks import INFLUXD, OUTPUT_FOLDER, PORT


@click.group("influxdb")
def command() -> None:
    """A local InfluxDB 2.x built by infra/build_influxdb.sh."""


@command.command("start")
@click.option("--port", type=PORT, default=None, help="Port on 127.0.0.1 (default: a free one).")
@click.option(
    "--data-dir",
    type=OUTPUT_FOLDER,
    default=None,
    help="Keep the data here across runs (default: a temporary directory, removed on exit).",
)
@click.option("--binary", type=INFLUXD, default=None)
def start(port: int | None, data_dir: Path | None, binary: Path | None) -> None:
    """Starts InfluxDB and prints what a collector or flow needs to reach it; Ctrl-C stops it."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        server = start_influxdb(binary, data_dir, port=port)
    except InfluxServerError as error:
        raise click.ClickException(str(error)) from None
    with server:
        # The token is printed on purpose: this is the user's own throwaway local database.
        click.echo(f"REFLEX_INFLUX_URL={server.url}")
        click.echo(f"REFLEX_INFLUX_TOKEN={server.token}")
        click.echo(f"REFLEX_INFLUX_ORG={server.org}")
        click.echo(f"REFLEX_INFLUX_BUCKET={server.bucket}")
        click.echo(f"REFLEX_INFLUX_RESULTS_BUCKET={server.results_bucket}")
        click.echo(f"# data in {server.data_dir}; log in {server.log_path}; Ctrl-C to stop")
        try:
            while not stop.wait(1.0):
                if not server.running:
                    raise click.ClickException(f"influxd exited; see {server.log_path}")
        except KeyboardInterrupt:
            pass
