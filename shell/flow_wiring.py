"""Builds the flow from REFLEX_* environment variables, for ``python -m bytewax.run``
(every process of a Bytewax cluster imports the flow the same way). ``reflex flow`` sets them.

* ``REFLEX_SOURCE``: ``sim:SCENARIO[:SEED]``, ``file:PATH.lp``, ``influx`` (the ``[influx]``
  settings of ``REFLEX_CONFIG`` and the environment, see :mod:`reflex_localize.influx.config`,
  or every ``[[telemetry_instances]]`` of that file, see :mod:`reflex_localize.influx.instances`)
  or ``influx-push`` (a replication stream pushes to the flow, see :mod:`shell.push_wiring`).
* ``REFLEX_SHARDS``: partitions of nodes (default 4). Keep it fixed for a deployment: a node's
  state lives in its shard.
* ``REFLEX_FILE_RANGES``: a ``file:`` source is read in this many byte ranges, one per worker
  (``reflex flow`` sets it), so no process reads another's lines; 0 or unset: by shard.
* ``REFLEX_SHARD_KEYS``: ``placed`` (default) or ``names``, how the shard step's states are
  keyed (:mod:`reflex_localize.flows.io.shard_keys`; ``names`` for a recovery directory written
  before placed keys).
* ``REFLEX_CLUSTER``: the one cluster the flow reads and names in its results; empty or unset:
  the first named cluster it sees (:mod:`reflex_localize.flows.io.one_cluster`).
* ``REFLEX_SINK``: ``files`` (default) or ``influx`` (results bucket ``REFLEX_RESULTS_BUCKET``,
  default ``reflex``; spool in ``REFLEX_OUT/spool``).
* ``REFLEX_OUT``: directory for events.jsonl, outputs.lp, errors.jsonl (errors only, with
  ``REFLEX_SINK=influx``).
* Influx source only: ``REFLEX_LAG_SECONDS`` (default 5), ``REFLEX_START_NS`` and
  ``REFLEX_STOP_NS`` (a fresh start's first window, default now; a replay's end, default none).
"""

from __future__ import annotations

import dataclasses
import gc
import math
import os
from pathlib import Path

from bytewax.dataflow import Dataflow
from bytewax.inputs import Source

from reflex_localize.flows.impact.model_file import ImpactModelFile
from reflex_localize.flows.impact.rows_log import ImpactRowsLog
from reflex_localize.flows.io.one_cluster import UNNAMED
from reflex_localize.flows.io.range_replay import LineProtocolRanges
from reflex_localize.flows.io.shard_keys import SCHEMES
from reflex_localize.flows.io.sinks import FlowSinks, file_sinks
from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.judge.alarm_budget import DEFAULT_BUDGET
from reflex_localize.flows.judge.job_step import JobConfig
from reflex_localize.flows.judge.weights import load_weights
from reflex_localize.flows.localize import build_flow
from reflex_localize.influx.config import Config, InfluxSettings, load_config
from reflex_localize.influx.instances import telemetry_instances
from reflex_localize.shell.flow_health import process_index, with_health
from reflex_localize.shell.logging_setup import configure_from_env
from reflex_localize.shell.simulated_source import SimulatorSource


class WiringError(ValueError):
    pass


def source_from_env(window_seconds: float) -> Source:
    spec = os.environ.get("REFLEX_SOURCE", "")
    shards = int(os.environ.get("REFLEX_SHARDS", "4"))
    kind, _, rest = spec.partition(":")
    if kind == "sim" and rest:
        scenario, _, seed = rest.partition(":")
        return SimulatorSource(scenario, int(seed or 7), shards, window_seconds)
    if kind == "file" and rest:
        ranges = int(os.environ.get("REFLEX_FILE_RANGES", "0"))  # reflex flow: one per worker
        if ranges > 0:
            return LineProtocolRanges(Path(rest), shards, window_seconds, ranges)
        return LineProtocolSource(Path(rest), shards, window_seconds)
    if kind == "influx" and not rest:
        return _influx_source(shards, window_seconds)
    if spec == "influx-push":
        from reflex_localize.shell.push_wiring import push_source

        config = _influx_config()
        return push_source(config.influx, shards, window_seconds, telemetry_instances(config))
    raise WiringError(
        f"REFLEX_SOURCE={spec!r}: expected sim:SCENARIO[:SEED], file:PATH, influx or influx-push"
    )


def sinks_from_env() -> FlowSinks:
    out = os.environ.get("REFLEX_OUT")
    if not out:
        raise WiringError("REFLEX_OUT is not set: the directory for the flow's outputs")
    kind = os.environ.get("REFLEX_SINK", "files")
    if kind == "files":
        return file_sinks(Path(out))
    if kind == "influx":
        return _influx_sinks(Path(out))
    raise WiringError(f"REFLEX_SINK={kind!r}: expected files or influx")


def _influx_source(shards: int, window_seconds: float) -> Source:
    """The polling source: over one instance, or over each of several, shard by shard."""
    from reflex_localize.flows.io.influx_instances import InstancesSource
    from reflex_localize.flows.io.influx_source import QUERY_TIMEOUT_S, InfluxSource

    start, stop = os.environ.get("REFLEX_START_NS"), os.environ.get("REFLEX_STOP_NS")
    readers = [
        InfluxSource(
            dataclasses.replace(influx, timeout_s=max(influx.timeout_s, QUERY_TIMEOUT_S)),
            n_shards=shards,
            window_seconds=window_seconds,
            lag_seconds=float(os.environ.get("REFLEX_LAG_SECONDS", "5")),
            start_ns=int(start) if start else None,
            stop_ns=int(stop) if stop else None,
            measure_server_clock=True,
        )
        for influx in telemetry_instances(_influx_config())
    ]
    return readers[0] if len(readers) == 1 else InstancesSource(readers)


def _influx_sinks(out: Path) -> FlowSinks:
    from reflex_localize.flows.io.influx_sink import influx_sinks

    results_bucket = os.environ.get("REFLEX_RESULTS_BUCKET", "reflex")
    return influx_sinks(dataclasses.replace(_influx_settings(), bucket=results_bucket), out)


def _influx_settings() -> InfluxSettings:
    return _influx_config().influx


def _influx_config() -> Config:
    """The config, with ``[influx]`` (where results go, and what telemetry instances default
    to) there."""
    config = load_config(os.environ.get("REFLEX_CONFIG") or None)
    if not config.influx.configured or not config.influx.token:
        raise WiringError(
            "InfluxDB is not configured: set [influx] url and token_file in REFLEX_CONFIG, or "
            "REFLEX_INFLUX_URL and REFLEX_INFLUX_TOKEN(_FILE)"
        )
    return config


def _shard_keys() -> str:
    scheme = os.environ.get("REFLEX_SHARD_KEYS", "placed")
    if scheme not in SCHEMES:
        raise WiringError(f"REFLEX_SHARD_KEYS={scheme!r}: expected one of {', '.join(SCHEMES)}")
    return scheme


def _alarm_budget() -> float:
    """False events per 1,000 node-hours the triggers that blame hardware may raise."""
    text = os.environ.get("REFLEX_ALARM_BUDGET", str(DEFAULT_BUDGET))
    try:
        budget = float(text)
    except ValueError:
        budget = math.nan
    if not math.isfinite(budget) or budget <= 0:
        raise WiringError(f"REFLEX_ALARM_BUDGET={text!r}: expected a positive number")
    return budget


def flow_from_env() -> Dataflow:
    """For ``python -m bytewax.run "reflex_localize.shell.flow_wiring:flow_from_env()"``."""
    window = float(os.environ.get("REFLEX_WINDOW_SECONDS", "10"))
    cluster = os.environ.get("REFLEX_CLUSTER") or None  # None: the first the flow sees
    config = JobConfig(window_seconds=window, cluster=cluster or UNNAMED)
    if os.environ.get("REFLEX_SOURCE") in ("influx", "influx-push"):
        # Live partitions poll the same windows in step; one that falls this far behind is
        # down, and the job goes on without it (its late windows go to the error stream).
        config.max_pending_windows = int(os.environ.get("REFLEX_MAX_PENDING_WINDOWS", "12"))
    config.alarm_budget = _alarm_budget()
    if os.environ.get("REFLEX_WEIGHTS"):  # weights refit by `reflex fit`
        config.weights = load_weights(Path(os.environ["REFLEX_WEIGHTS"]))
    if os.environ.get("REFLEX_IMPACT_ROWS_DIR"):  # what the next `reflex fit-impact` learns from
        rows_dir = Path(os.environ["REFLEX_IMPACT_ROWS_DIR"])
        config.impact_recorder = ImpactRowsLog(rows_dir, f"p{process_index()}")
    if os.environ.get("REFLEX_IMPACT_MODEL"):  # learned by `reflex fit-impact`
        # Held as the file: a refit that replaces it reaches the running flow.
        config.impact = ImpactModelFile(Path(os.environ["REFLEX_IMPACT_MODEL"]))
    configure_from_env()  # this is a worker process: the parent's --log-level/--log-format
    out = os.environ.get("REFLEX_OUT")
    impact = config.impact if isinstance(config.impact, ImpactModelFile) else None
    source, sinks, _ = with_health(
        source_from_env(window), sinks_from_env(), Path(out or "."), impact=impact
    )
    flow = build_flow(
        source,
        sinks,
        window_seconds=window,
        cluster=cluster,
        job_config=config,
        shard_keys=_shard_keys(),
    )
    _settle_collector()
    return flow


def _settle_collector() -> None:
    """Once the process is set up, what it made (modules, the flow) lives as long as it does:
    the cyclic collector stops scanning it (``gc.freeze``), and collects young objects every
    10,000 allocations rather than 700. The window pieces and job windows a process unpickles
    from another fill the young generation: replaying the mixture capture in 2 processes spent
    0.44 s collecting, 0.15 s so (timed by ``gc.callbacks``)."""
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)
