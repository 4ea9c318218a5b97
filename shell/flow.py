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

A run that ends (a file, the simulator, InfluxDB up to --stop-ns) prints a table of what it
rejected, by where and reason, from OUT/errors.jsonl; a live run exports the same counts as
``reflex_rejects`` points.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from reflex_localize.flows.io.shard_keys import SCHEMES
from reflex_localize.influx.local_server import free_port
from reflex_localize.shell.cli_checks import (
    AT_LEAST_ONE,
    NOT_NEGATIVE,
    NOT_NEGATIVE_SECONDS,
    OUTPUT_FOLDER,
    POSITIVE_SECONDS,
    check_token,
    host_port,
    input_problem,
    scenario_problem,
)
from reflex_localize.shell.flow_cluster import (
    chosen_cluster,
    cluster_parameters,
    untold_live_problem,
)
from reflex_localize.shell.influx_options import InfluxOptions, influx_options
from reflex_localize.shell.recovery_guard import (
    Parameters,
    recovery_problem,
    remember_parameters,
    saved_parameter,
)
from reflex_localize.shell.recovery_keys import keys_problem
from reflex_localize.shell.reject_summary import read_reject_counts, report_rejects

FLOW = "reflex_localize.shell.flow_wiring:flow_from_env()"
_PR_SET_PDEATHSIG = 1  # prctl(2)


class FlowSource(click.ParamType):
    """``influx``, ``file:PATH`` (a line-protocol file) or ``sim:SCENARIO[:SEED]``, checked
    here: the flow's own processes would only fail on it with a panic.

    >>> FlowSource().convert("sim:demo:7", None, None)
    'sim:demo:7'
    """

    name = "source"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        problem = _source_problem(str(value))
        if problem:
            self.fail(problem, param, ctx)
        return str(value)


def _source_problem(value: str) -> str | None:
    kind, _, rest = value.partition(":")
    if value in ("influx", "influx-push"):
        return None
    if kind == "file" and rest:
        problem = input_problem(Path(rest), regular=True)
        return f"{value}: {problem}" if problem else None
    if kind == "sim" and rest:
        scenario, _, seed = rest.partition(":")
        if seed and not seed.isdigit():
            return f"{value}: the seed {seed!r} is not a whole number >= 0"
        return scenario_problem(scenario)  # a line that names the scenario
    return f"{value}: expected influx, influx-push, file:PATH or sim:SCENARIO[:SEED]"


def _addresses(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return ";".join("{}:{}".format(*host_port(address)) for address in value.split(";"))
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


def _model_file(loader: Callable[[Path], object]) -> Callable[..., Path | None]:
    """A callback that loads the file once here: a bad one is a clear error before any process
    starts, not a panic in each of them."""

    def check(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
        if value is None:
            return None
        try:
            loader(value)
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise click.BadParameter(f"{value}: {error}") from None
        return value.resolve()

    return check


def _load_impact(path: Path) -> object:
    from reflex_localize.flows.impact.model import ImpactModel

    return ImpactModel.load(path)


def _load_weights(path: Path) -> object:
    from reflex_localize.flows.judge.weights import load_weights

    return load_weights(path)


@click.command(name="flow")
@click.option("--source", type=FlowSource(), default="influx", show_default=True,
              help="influx, influx-push, file:PATH.lp or sim:SCENARIO[:SEED].")  # fmt: skip
@click.option("--sink", type=click.Choice(["influx", "files"]), default="influx",
              show_default=True, help="Results to InfluxDB, or to files.")  # fmt: skip
@click.option("--out", type=OUTPUT_FOLDER, required=True,
              help="Output directory: files, errors.jsonl, spool, recovery.")  # fmt: skip
@influx_options
@click.option("--results-bucket", default="reflex", show_default=True)
@click.option("--cluster",
              help="The cluster this flow reads and names in its results; lines of others "
                   "are counted and told once. Default: the recovery's, else the source's "
                   "first.")  # fmt: skip
@click.option("--shards", type=AT_LEAST_ONE, default=4, show_default=True,
              help="Node shards (source partitions). Fixed for a deployment.")  # fmt: skip
@click.option("--shard-keys", type=click.Choice(SCHEMES), default="placed", show_default=True,
              help="How shard states are keyed; 'names' for a recovery directory from before "
                   "placed keys.")  # fmt: skip
@click.option("--window", type=POSITIVE_SECONDS, default=10.0, show_default=True,
              help="Window length in seconds.")  # fmt: skip
@click.option("--lag", type=NOT_NEGATIVE_SECONDS, default=5.0, show_default=True,
              help="Influx source: seconds a window waits for late writes.")  # fmt: skip
@click.option("--start-ns", type=NOT_NEGATIVE,
              help="Influx source, fresh start: first window (ns).")  # fmt: skip
@click.option("--stop-ns", type=NOT_NEGATIVE,
              help="Influx source: stop here (a replay of the past).")  # fmt: skip
@click.option("--recovery-dir", type=OUTPUT_FOLDER,
              help="Bytewax recovery partitions (default OUT/recovery).")  # fmt: skip
@click.option("--recovery-parts", type=AT_LEAST_ONE, default=1, show_default=True,
              help="Recovery partitions created on first start; cannot change later.")  # fmt: skip
@click.option("--no-recovery", is_flag=True, help="Run without recovery (tests, benchmarks).")
@click.option("-s", "--snapshot-interval", type=AT_LEAST_ONE, default=30, show_default=True,
              help="Seconds between recovery snapshots (the most a restart replays).")  # fmt: skip
@click.option("-b", "--backup-interval", type=NOT_NEGATIVE, default=0, show_default=True,
              help="Seconds to keep old snapshots (set to your backup period).")  # fmt: skip
@click.option("-w", "--workers", type=AT_LEAST_ONE, default=1, show_default=True,
              help="Workers per process.")  # fmt: skip
@click.option("-p", "--processes", type=AT_LEAST_ONE, default=1, show_default=True,
              help="Processes on this host.")  # fmt: skip
@click.option("-i", "--process-id", type=NOT_NEGATIVE,
              help="This process's index in a cluster.")  # fmt: skip
@click.option("-a", "--addresses", callback=_addresses,
              help='Cluster addresses: "host0:port;host1:port".')  # fmt: skip
@click.option("--health-address", envvar="REFLEX_HEALTH_ADDRESS", metavar="HOST:PORT",
              help="Serve /healthz and /metrics here (-p N: process K on PORT+K).")  # fmt: skip
@click.option("--impact-model", envvar="REFLEX_IMPACT_MODEL", type=click.Path(path_type=Path),
              callback=_model_file(_load_impact),
              help="A `reflex fit-impact` model; a refit that replaces the file is taken "
                   "within a minute, by running jobs too.")  # fmt: skip
@click.option("--impact-rows", envvar="REFLEX_IMPACT_ROWS_DIR", type=OUTPUT_FOLDER,
              help="Keep the impact model's training rows here, a file a day (8 days), "
                   "for `reflex fit-impact --rows DIR`.")  # fmt: skip
@click.option("--weights", envvar="REFLEX_WEIGHTS", type=click.Path(path_type=Path),
              callback=_model_file(_load_weights),
              help="Evidence weights refit by `reflex fit` (taken at start).")  # fmt: skip
def command(
    source: str,
    sink: str,
    out: Path,
    influx: InfluxOptions,
    results_bucket: str,
    cluster: str | None,
    shards: int,
    shard_keys: str,
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
    health_address: str | None,
    impact_model: Path | None,
    impact_rows: Path | None,
    weights: Path | None,
) -> None:
    """Run the localization flow with recovery, on one or many processes and hosts."""
    _check_cluster(process_id, addresses, processes)
    if start_ns is not None and stop_ns is not None and stop_ns <= start_ns:
        raise click.BadParameter(
            f"{stop_ns} is not after --start-ns {start_ns}", param_hint="'--stop-ns'"
        )
    directory = None if no_recovery else recovery_dir or out / "recovery"
    saved = saved_parameter(directory, "cluster") if directory is not None else None
    cluster = chosen_cluster(cluster, source, saved)
    if cluster is None and (problem := untold_live_problem(source, processes, addresses)):
        raise click.UsageError(problem)
    if source == "influx-push":
        _check_push()
    if "influx" in (sink, source) or source == "influx-push":
        # A clear error before any process; an InfluxDB that is down is waited for.
        results = influx.require(f"--source {source} --sink {sink}")
        reads = influx.telemetry_instances() if source.startswith("influx") else ()
        for settings in dict.fromkeys((results, *reads)):
            check_token(settings, service=True)
    out.mkdir(parents=True, exist_ok=True)
    env = {
        **influx.env,
        "REFLEX_SOURCE": source,
        "REFLEX_SINK": sink,
        "REFLEX_OUT": str(out),
        "REFLEX_SHARDS": str(shards),
        # A file is read by byte range, one per worker of the cluster (flows/io/range_replay.py).
        "REFLEX_FILE_RANGES": str(
            workers * (processes if addresses is None else len(addresses.split(";")))
        ),
        "REFLEX_SHARD_KEYS": shard_keys,
        "REFLEX_WINDOW_SECONDS": str(window),
        "REFLEX_CLUSTER": cluster or "",  # empty: the first cluster the flow sees
        "REFLEX_LAG_SECONDS": str(lag),
        "REFLEX_RESULTS_BUCKET": results_bucket,
        **({"REFLEX_HEALTH_ADDRESS": health_address} if health_address else {}),
        **{k: v for k, v in os.environ.items() if k.startswith("REFLEX_PUSH_")},  # push_wiring
        "REFLEX_SITE_TAGS": site_tags_setting(influx.config().sections),
    }
    for name, value in (
        ("REFLEX_START_NS", start_ns),
        ("REFLEX_STOP_NS", stop_ns),
        ("REFLEX_IMPACT_MODEL", impact_model),
        ("REFLEX_IMPACT_ROWS_DIR", impact_rows and impact_rows.resolve()),
        ("REFLEX_WEIGHTS", weights),
    ):
        if value is not None:
            env[name] = str(value)
    args = [sys.executable, "-m", "bytewax.run", FLOW, "-w", str(workers)]
    if directory is not None:
        parameters: Parameters = {"window": window, "shards": shards}
        parameters.update(cluster_parameters(cluster, saved))
        problem = recovery_problem(directory, parameters)  # first: it opens each partition
        if problem is not None:
            raise click.ClickException(problem)
        problem = keys_problem(directory, shard_keys)
        if problem is not None:
            raise click.UsageError(problem)
        if process_id in (None, 0):
            ensure_recovery_dir(directory, recovery_parts)
        else:
            directory.mkdir(parents=True, exist_ok=True)
        remember_parameters(directory, parameters)
        args += ["-r", str(directory), "-s", str(snapshot_interval), "-b", str(backup_interval)]
    if processes > 1:
        env["REFLEX_HEALTH_PORT_PER_PROCESS"] = "1"  # -p N share a host: process K on PORT+K
        status = run_local_cluster(args, processes, env)
        _print_rejects(out)
        sys.exit(status)
    if process_id is not None:
        args += ["-i", str(process_id), "-a", str(addresses)]
    if source in ("influx", "influx-push") and stop_ns is None:
        os.execve(sys.executable, args, env)  # runs until stopped: its rejects go to InfluxDB
    status = run_children([args], env)  # a run that ends: its rejects are totalled after it
    _print_rejects(out)
    sys.exit(status)


def site_tags_setting(sections: Mapping[str, Any]) -> str:
    """The site tags of the config file's ``[site] tags`` and ``REFLEX_SITE_TAGS``, checked and
    joined for the flow's processes (which read only the environment)."""
    from reflex_localize.schemas.site_tags import site_tags

    try:
        return ",".join(site_tags(config=sections))
    except ValueError as error:
        raise click.UsageError(str(error)) from None


def _check_push() -> None:
    from reflex_localize.influx.config import ConfigError
    from reflex_localize.shell.push_wiring import PushWiringError, check_push_settings

    try:
        check_push_settings()
    except (PushWiringError, ConfigError) as error:
        raise click.UsageError(str(error)) from None


def _print_rejects(out: Path) -> None:
    report_rejects(read_reject_counts(out / "errors.jsonl"))


def _check_cluster(process_id: int | None, addresses: str | None, processes: int) -> None:
    if (process_id is None) != (addresses is None):
        raise click.UsageError("-i and -a go together")
    if process_id is None or addresses is None:
        return
    if processes > 1:
        raise click.UsageError("use -p on one host, or -i/-a across hosts, not both")
    count = len(addresses.split(";"))
    if process_id >= count:
        raise click.UsageError(f"-i {process_id}: -a names {count} address(es), -i counts from 0")


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
    """Runs ``processes`` Bytewax processes on loopback; see :func:`run_children`."""
    addresses = ";".join(f"127.0.0.1:{free_port()}" for _ in range(processes))
    return run_children([[*args, "-i", str(i), "-a", addresses] for i in range(processes)], env)


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent dies, so that a `reflex flow`
    killed outright (kill -9, the OOM killer) leaves no flow running on behind it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def run_children(commands: list[list[str]], env: dict[str, str]) -> int:
    """Runs the commands (Bytewax processes); if one fails, stops the rest. Returns the first
    non-zero exit status, else 0. SIGTERM and SIGINT are passed on."""
    children = [
        subprocess.Popen(command, env=env, preexec_fn=_die_with_parent) for command in commands
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
