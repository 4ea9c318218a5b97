"""``reflex flow``: the localization flow in production, under ``python -m bytewax.run``.

It turns its options into the ``REFLEX_*`` environment of :mod:`shell.flow_wiring` and runs
``python -m bytewax.run "shell.flow_wiring:flow_from_env()"`` with recovery, so a crash or a
restart resumes from the last snapshot. The recovery directory is created on first start
(``python -m bytewax.recovery DIR N``).

Scale: ``-w N`` workers (threads, sharing the GIL) in one process; ``-p N`` processes on this
host (started and supervised here, each ``bytewax.run -i K -a ...``); or one process of a
cluster across hosts with ``-i K -a "host0:port;host1:port"`` (see docs/flow-cluster.md).

reflex flow --source influx --sink influx --out /var/lib/reflex/flow --config reflex.toml
reflex flow --source sim:demo --sink files --out /tmp/flow -p 2
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click

from reflex_localize.influx.local_server import free_port
from reflex_localize.shell.influx_options import InfluxOptions, influx_options

FLOW = "reflex_localize.shell.flow_wiring:flow_from_env()"


@click.command(name="flow")
@click.option("--source", "source", default="influx", show_default=True,
              help="influx, file:PATH.lp or sim:SCENARIO[:SEED].")  # fmt: skip
@click.option("--sink", type=click.Choice(["influx", "files"]), default="influx",
              show_default=True, help="Results to InfluxDB, or to files.")  # fmt: skip
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Output directory: files, errors.jsonl, spool, recovery.")  # fmt: skip
@influx_options
@click.option("--results-bucket", default="reflex", show_default=True)
@click.option("--cluster", default="default", show_default=True, help="cluster tag of results.")
@click.option("--shards", default=4, show_default=True,
              help="Node shards (source partitions). Fixed for a deployment.")  # fmt: skip
@click.option("--window", default=10.0, show_default=True, help="Window length in seconds.")
@click.option("--lag", default=5.0, show_default=True,
              help="Influx source: seconds a window waits for late writes.")  # fmt: skip
@click.option("--start-ns", type=int, help="Influx source, fresh start: first window (ns).")
@click.option("--stop-ns", type=int, help="Influx source: stop here (a replay of the past).")
@click.option("--recovery-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Bytewax recovery partitions (default OUT/recovery).")  # fmt: skip
@click.option("--recovery-parts", default=1, show_default=True,
              help="Recovery partitions created on first start; cannot change later.")  # fmt: skip
@click.option("--no-recovery", is_flag=True, help="Run without recovery (tests, benchmarks).")
@click.option("-s", "--snapshot-interval", default=30, show_default=True,
              help="Seconds between recovery snapshots (the most a restart replays).")  # fmt: skip
@click.option("-b", "--backup-interval", default=0, show_default=True,
              help="Seconds to keep old snapshots (set to your backup period).")  # fmt: skip
@click.option("-w", "--workers", default=1, show_default=True, help="Workers per process.")
@click.option("-p", "--processes", default=1, show_default=True,
              help="Processes on this host.")  # fmt: skip
@click.option("-i", "--process-id", type=int, help="This process's index in a cluster.")
@click.option("-a", "--addresses", help='Cluster addresses: "host0:port;host1:port".')
def command(
    source: str,
    sink: str,
    out: Path,
    influx: InfluxOptions,
    results_bucket: str,
    cluster: str,
    shards: int,
    window: float,
    lag: float,
    start_ns: int | None,
    stop_ns: int | None,
    recovery_dir: Path | None,
    recovery_parts: int,
    no_recovery: bool,
    snapshot_interval: int,
    backup_interval: int,
    workers: int,
    processes: int,
    process_id: int | None,
    addresses: str | None,
) -> None:
    """Run the localization flow with recovery, on one or many processes and hosts."""
    if (process_id is None) != (addresses is None):
        raise click.UsageError("-i and -a go together")
    if process_id is not None and processes > 1:
        raise click.UsageError("use -p on one host, or -i/-a across hosts, not both")
    if "influx" in (sink, source):
        influx.require(f"--source {source} --sink {sink}")  # a clear error before any process
    out.mkdir(parents=True, exist_ok=True)
    env = {
        **influx.env,
        "REFLEX_SOURCE": source,
        "REFLEX_SINK": sink,
        "REFLEX_OUT": str(out),
        "REFLEX_SHARDS": str(shards),
        "REFLEX_WINDOW_SECONDS": str(window),
        "REFLEX_CLUSTER": cluster,
        "REFLEX_LAG_SECONDS": str(lag),
        "REFLEX_RESULTS_BUCKET": results_bucket,
    }
    for name, value in (
        ("REFLEX_START_NS", start_ns),
        ("REFLEX_STOP_NS", stop_ns),
    ):
        if value is not None:
            env[name] = str(value)
    args = [sys.executable, "-m", "bytewax.run", FLOW, "-w", str(workers)]
    if not no_recovery:
        directory = recovery_dir or out / "recovery"
        if process_id in (None, 0):
            ensure_recovery_dir(directory, recovery_parts)
        else:
            directory.mkdir(parents=True, exist_ok=True)
        args += ["-r", str(directory), "-s", str(snapshot_interval), "-b", str(backup_interval)]
    if processes > 1:
        sys.exit(run_local_cluster(args, processes, env))
    if process_id is not None:
        args += ["-i", str(process_id), "-a", str(addresses)]
    os.execve(sys.executable, args, env)


def ensure_recovery_dir(directory: Path, parts: int) -> None:
    """Creates the recovery partitions once; a directory that has them is left alone."""
    if any(directory.glob("part-*")):
        return
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "bytewax.recovery", str(directory), str(parts)],
        check=True,
        timeout=60,
    )


def run_local_cluster(args: list[str], processes: int, env: dict[str, str]) -> int:
    """Runs ``processes`` Bytewax processes on loopback; if one fails, stops the rest.

    Returns the first non-zero exit status, else 0. SIGTERM and SIGINT are passed on.
    """
    addresses = ";".join(f"127.0.0.1:{free_port()}" for _ in range(processes))
    children = [
        subprocess.Popen([*args, "-i", str(index), "-a", addresses], env=env)
        for index in range(processes)
    ]

    def forward(signum: int, frame: object) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    status = 0
    while any(child.poll() is None for child in children):
        failed = [c.returncode for c in children if c.returncode not in (None, 0)]
        if failed and not status:
            status = failed[0]
            forward(signal.SIGTERM, None)
        time.sleep(0.2)
    return status or next((c.returncode for c in children if c.returncode), 0)
