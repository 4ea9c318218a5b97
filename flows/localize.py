"""The localization dataflow: telemetry windows in; scores, baselines, events and errors out.

The same flow runs whatever feeds it (simulator, line-protocol replay, InfluxDB) and wherever
it runs (in-process, ``-w``/``-p`` on one host, a Bytewax cluster across hosts).

The shell runs it: ``reflex localize`` in-process, ``reflex flow`` under ``python -m bytewax.run``
(see :mod:`reflex_localize.shell.flow_wiring`).
"""

from __future__ import annotations

import dataclasses
import pickle
from collections import Counter
from collections.abc import Callable
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.inputs import Source
from bytewax.operators import StatefulLogic

from reflex_localize.flows.io.one_cluster import REASON, UNNAMED, OneCluster
from reflex_localize.flows.io.shard_keys import state_key
from reflex_localize.flows.io.sinks import FlowSinks
from reflex_localize.flows.io.window_pieces import AssemblyLogic
from reflex_localize.flows.judge.job_step import JobConfig, JobState
from reflex_localize.flows.judge.shard_step import ShardConfig, ShardState, reject_points
from reflex_localize.flows.messages import ErrorRecord, JobWindow, WindowBatch

Routed = tuple[str, Any]  # (route, item): route is "event", "points", "error" or a job name


class _ShardLogic(StatefulLogic[WindowBatch, Routed, ShardState]):
    def __init__(self, state: ShardState, one_cluster: OneCluster) -> None:
        self.state, self.one_cluster = state, one_cluster

    def on_item(self, value: WindowBatch) -> tuple[list[Routed], bool]:
        out: list[Routed] = [("error", error) for error in value.errors]
        frames, aside = self.one_cluster.keep(value.frames)
        if aside:  # another cluster's rows: counted every window, told once
            value = dataclasses.replace(value, frames=frames)
            out += [("error", record) for record in self.one_cluster.tell(aside)]
            ignored = {("ignored", REASON): sum(aside.values())}
            cluster = self.state.config.cluster
            out.append(("points", reject_points(ignored, cluster, value.end_ns, value.shard)))
        try:
            out.extend(self.state.on_batch(value))
        except Exception as error:
            out.append(
                (
                    "error",
                    ErrorRecord(
                        "shard_step",
                        "internal_error",  # a bug: counted, the window skipped, the flow goes on
                        f"{type(error).__name__}: {error}; {value.shard} window {value.window}",
                    ),
                )
            )
        out.extend(reject_counts(out, self.state.config.cluster, value.end_ns, value.shard))
        return out, StatefulLogic.RETAIN

    def snapshot(self) -> ShardState:
        return _copied(self.state)


class _JobLogic(StatefulLogic[JobWindow, Routed, JobState]):
    def __init__(self, state: JobState) -> None:
        self.state = state

    def on_item(self, value: JobWindow) -> tuple[list[Routed], bool]:
        try:
            out = self.state.on_window(value)
            if self.state.finished and not self.state.pending:
                self.state = self.state.retired()
        except Exception as error:
            out = [
                (
                    "error",
                    ErrorRecord(
                        "job_step",
                        "internal_error",
                        f"{type(error).__name__}: {error}; {value.job} window {value.window}",
                    ),
                )
            ]
        return out, StatefulLogic.RETAIN

    def on_eof(self) -> tuple[list[Routed], bool]:
        return self.state.on_eof(), StatefulLogic.RETAIN

    def snapshot(self) -> JobState:
        # Without the configuration: a resumed job takes the running flow's (job_logic).
        config, self.state.config = self.state.config, None  # type: ignore[assignment]
        try:
            return _copied(self.state)
        finally:
            self.state.config = config


def _copied(state: Any) -> Any:
    """A snapshot that the running state cannot change: a pickle round trip, as the recovery
    store keeps it anyway. The states are mostly numpy arrays, dicts and small dataclasses,
    which copy.deepcopy walks an object at a time: it cost about twice as much."""
    return pickle.loads(pickle.dumps(state, pickle.HIGHEST_PROTOCOL))


def job_logic(config: JobConfig) -> Callable[[JobState | None], _JobLogic]:
    """The job step's state builder. A job resumed from a snapshot runs under this flow's
    configuration, not the one it was snapshotted with: a training job lives for weeks, and
    the impact model refit nightly, weights refit from operators' verdicts, or a setting
    changed on restart must reach it, not only the jobs that start after."""

    def build(resume: JobState | None) -> _JobLogic:
        if resume is None:
            return _JobLogic(JobState("", config))
        resume.config = config
        return _JobLogic(resume)

    return build


def reject_counts(out: list[Routed], cluster: str, time_ns: int, shard: str = "") -> list[Routed]:
    """The window's rejects totalled by where and code, as points: so InfluxDB (and its
    dashboards) can count what the flow refused, not only the error files."""
    counts = Counter((item.where, item.reason) for route, item in out if route == "error")
    return [("points", reject_points(counts, cluster, time_ns, shard))] if counts else []


def build_flow(
    source: Source,
    sinks: FlowSinks,
    *,
    window_seconds: float = 10.0,
    cluster: str | None = None,
    job_config: JobConfig | None = None,
    shard_keys: str = "placed",
) -> Dataflow:
    """The flow reads one cluster (:mod:`flows.io.one_cluster`): ``cluster``, which also tags
    its results; None: the first named cluster its telemetry shows, whose name the results
    then carry."""
    named = cluster or UNNAMED
    shard_config = ShardConfig(window_seconds=window_seconds, cluster=named)
    job_config = job_config or JobConfig(window_seconds=window_seconds, cluster=named)

    def follow(name: str) -> None:  # the states of this process share these configurations
        shard_config.cluster = job_config.cluster = name

    one_cluster = OneCluster(cluster, follow)
    flow = Dataflow("reflex-localize")
    batches = op.input("telemetry", flow, source)
    # WindowBatch: one per shard and window, in window order per shard. Keyed so that Bytewax
    # keeps each shard's state on the worker that reads it (flows/io/shard_keys.py).
    # (WindowPiece, from a source split by byte range: a range's rows of a shard's window)
    if getattr(source, "emits_pieces", False):
        pieces = op.key_on(
            "key_piece_by_shard",
            batches,
            lambda p: state_key(p.batch.shard, p.batch.n_shards, shard_keys),
        )
        # (shard, WindowPiece)
        by_shard = op.stateful("assemble_windows", pieces, AssemblyLogic)
    else:
        by_shard = op.key_on(
            "key_by_shard", batches, lambda b: state_key(b.shard, b.n_shards, shard_keys)
        )
    # (shard, WindowBatch)
    shard_out = op.stateful(
        "shard_step",
        by_shard,
        lambda resume: _ShardLogic(resume or ShardState(shard_config), one_cluster),
    )
    # (shard, (route, item)): route = job name for JobWindows, else points/error
    routed = op.map("drop_shard_key", shard_out, lambda kv: kv[1])
    # (route, item)
    branches = op.branch("is_job_window", routed, lambda r: isinstance(r[1], JobWindow))
    job_windows = op.map("unwrap_job_window", branches.trues, lambda r: r[1])
    # JobWindow
    by_job = op.key_on("key_by_job", job_windows, lambda w: w.job)
    job_out = op.stateful("job_step", by_job, job_logic(job_config))
    # (job, (route, item))
    job_routed = op.map("drop_job_key", job_out, _name_job)
    # (route, item)
    outputs = op.merge("all_outputs", job_routed, branches.falses)
    # (route, item): route in event | points | error
    _attach_sinks(outputs, sinks)
    return flow


def _name_job(kv: tuple[str, Routed]) -> Routed:
    return kv[1]


def _attach_sinks(outputs: op.Stream[Routed], sinks: FlowSinks) -> None:
    for route, spec in (("event", sinks.events), ("points", sinks.points), ("error", sinks.errors)):
        if spec is not None:
            chosen = op.filter(f"{route}_only", outputs, _route_is(route))
            shaped = op.map(f"{route}_shape", chosen, _shaped(spec.shape))
            op.output(f"{route}_sink", shaped, spec.sink)


def _route_is(route: str) -> Callable[[Routed], bool]:
    def check(routed: Routed) -> bool:
        return routed[0] == route and bool(routed[1])

    return check


def _shaped(shape: Callable[[Any], Any]) -> Callable[[Routed], Routed]:
    def apply(routed: Routed) -> Routed:
        return routed[0], shape(routed[1])

    return apply
