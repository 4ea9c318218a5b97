"""How an incident report cuts its telemetry: frames into the series it plots.

The suspect's signal is set against the median and p10-p90 band of its peers and against its
own baseline, computed exactly as the flow computes them; around it, the job's membership,
its step time per pipeline stage and the event log. The frames come from a
:class:`~reflex_localize.shell.report_sources.TimelineSource`.

>>> import numpy as np
>>> from reflex_localize.schemas.frame import Frame
>>> from reflex_localize.shell.report_sources import FrameSource
>>> tags = {"cluster": np.array(["c"], dtype=object), "job": np.array(["j"], dtype=object),
...         "node": np.array(["a"], dtype=object), "rank": np.array(["0"], dtype=object)}
>>> source = FrameSource([Frame("job_membership", np.array([5], dtype=np.int64), tags,
...                                 {"gpu": np.array([3]), "pp_rank": np.array([1])})])
>>> [m.entity for m in job_members(source, "j", 0, 10)]
['a|gpu|3']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from reflex_localize.flows.signals.derive import SIGNALS, STEP_SIGNAL, CounterMemory, derive
from reflex_localize.schemas.frame import Frame
from reflex_localize.shell.report_sources import TimelineSource

MEMBERSHIP_LOOKBACK_NS = 10 * 60 * 10**9  # membership is re-sent every minute while a job runs
MAD_TO_SIGMA = 1.4826


# ---- job membership ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    rank: int
    node: str
    gpu: int
    pp_rank: int
    profile: str

    @property
    def entity(self) -> str:
        return f"{self.node}|gpu|{self.gpu}"


def job_members(source: TimelineSource, job: str, start_ns: int, end_ns: int) -> list[Member]:
    """The ranks of ``job``, from the newest membership rows before ``end_ns``."""
    frames = source.frames("job_membership", start_ns - MEMBERSHIP_LOOKBACK_NS, end_ns, job=job)
    latest: dict[int, tuple[int, Member]] = {}
    for frame in frames:
        for row in range(len(frame)):
            rank = int(frame.tags["rank"][row])
            member = Member(
                rank,
                str(frame.tags["node"][row]),
                int(frame.fields["gpu"][row]) if "gpu" in frame.fields else 0,
                int(frame.fields["pp_rank"][row]) if "pp_rank" in frame.fields else 0,
                str(frame.fields["profile"][row]) if "profile" in frame.fields else "",
            )
            when = int(frame.time_ns[row])
            if rank not in latest or latest[rank][0] <= when:
                latest[rank] = (when, member)
    return [member for _, (_, member) in sorted(latest.items())]


# ---- series -------------------------------------------------------------------------------------


@dataclass
class Timeline:
    """One signal of one entity, bucketed: the entity itself, its peers, its own baseline.

    ``baseline_center``/``baseline_spread`` are per bucket (NaN where unknown);
    ``baseline_origin`` says where they came from.
    """

    signal: str
    entity: str
    label: str
    times_ns: np.ndarray
    own: np.ndarray
    peer_median: np.ndarray
    peer_p10: np.ndarray
    peer_p90: np.ndarray
    peer_count: int
    peer_label: str
    baseline_center: np.ndarray
    baseline_spread: np.ndarray
    baseline_origin: str
    onset_ns: int


@dataclass(frozen=True)
class Range:
    """The time a report covers, cut into buckets aligned to the epoch, as the flow's windows.

    >>> Range(5, 25, 10).edges.tolist()
    [0, 10, 20, 30]
    """

    start_ns: int
    end_ns: int
    bucket_ns: int

    @property
    def edges(self) -> np.ndarray:
        first = self.start_ns // self.bucket_ns
        last = -(-self.end_ns // self.bucket_ns)
        return np.arange(first, last + 1, dtype=np.int64) * self.bucket_ns


def signal_timeline(
    source: TimelineSource,
    job: str,
    signal: str,
    entity: str,
    members: list[Member],
    span: Range,
    onset_ns: int,
) -> Timeline | None:
    """The suspect ``entity`` on ``signal`` against the same component on the job's nodes."""
    definition = SIGNALS.get(signal)
    if definition is None:
        if signal != STEP_SIGNAL:
            return None
        return step_timeline(source, job, entity, members, span, onset_ns)
    node, component, _ = entity.split("|")
    like = _same_hardware(members, node)
    nodes = sorted({m.node for m in like} | {node})
    frames = source.frames(
        definition.measurement, span.start_ns, span.end_ns, nodes=nodes, fields=definition.fields
    )
    columns = _derived_columns(frames, signal, span)
    if entity not in columns:
        return None
    if component == "gpu" and like:
        peers = {m.entity for m in like} - {entity}
    else:
        peers = {e for e in columns if e.split("|")[1] == component and e != entity}
    peer_rows = [columns[e] for e in sorted(peers) if e in columns]
    fields = definition.fields[0] if definition.reduce == "mean" else signal
    label = f"{signal} ({_describe_reduce(definition.reduce, fields)})"
    profile = like[0].profile if like else ""
    return _timeline(
        source, signal, entity, label, span, onset_ns, columns[entity], peer_rows,
        f"{len(peer_rows)} other {component}s of the job{_on(profile)}", definition.floor,
    )  # fmt: skip


def _same_hardware(members: list[Member], node: str) -> list[Member]:
    """The job's ranks on the suspect node's hardware profile: normal ranges differ by model."""
    profile = next((m.profile for m in members if m.node == node), None)
    return [m for m in members if profile is None or m.profile == profile]


def _on(profile: str) -> str:
    return f" on {profile}" if profile else ""


def _describe_reduce(reduce: str, fields: str) -> str:
    return {
        "mean": f"{fields}, mean per bucket",
        "rate": "per second",
        "bits": "fraction of samples",
    }.get(reduce, "fraction of samples")


def _derived_columns(frames: list[Frame], signal: str, span: Range) -> dict[str, np.ndarray]:
    """entity -> derived value per bucket, computed exactly as the flow computes it."""
    edges = span.edges
    window_s = span.bucket_ns / 1e9
    memory = CounterMemory()
    by_bucket: dict[int, list[Frame]] = {}
    for frame in frames:
        buckets = np.searchsorted(edges, frame.time_ns, side="right") - 1
        for bucket in np.unique(buckets).tolist():
            by_bucket.setdefault(bucket, []).append(frame.take(buckets == bucket))
    columns: dict[str, np.ndarray] = {}
    n = len(edges) - 1
    for bucket in sorted(by_bucket):
        if not 0 <= bucket < n:
            continue
        window = derive(by_bucket[bucket], window_s, memory)
        column = window.values[:, list(SIGNALS).index(signal)]
        for entity, value in zip(window.entities.tolist(), column.tolist(), strict=True):
            columns.setdefault(entity, np.full(n, np.nan))[bucket] = value
    return columns


def step_timeline(
    source: TimelineSource,
    job: str,
    entity: str,
    members: list[Member],
    span: Range,
    onset_ns: int,
) -> Timeline | None:
    """The suspect rank's compute time per step against the other ranks of its pipeline stage
    (the last stage is legitimately slower, so all ranks would be the wrong peers)."""
    mine = [m for m in members if m.entity == entity]
    if not mine:
        return None
    me = mine[0]
    stage = me.pp_rank
    peers = [m.rank for m in members if (m.pp_rank, m.profile) == (stage, me.profile) and m != me]
    job_frames = source.frames("train_step", span.start_ns, span.end_ns, job=job)
    per_rank = _rank_columns(job_frames, "compute_seconds", span)
    if mine[0].rank not in per_rank:
        return None
    peer_rows = [per_rank[r] for r in peers if r in per_rank]
    return _timeline(
        source, STEP_SIGNAL, entity, f"{STEP_SIGNAL} (train_step compute_seconds, rank "
        f"{mine[0].rank})", span, onset_ns, per_rank[mine[0].rank], peer_rows,
        f"{len(peer_rows)} other ranks of pipeline stage {stage}{_on(me.profile)}", 1e-3,
    )  # fmt: skip


def _rank_columns(frames: list[Frame], field: str, span: Range) -> dict[int, np.ndarray]:
    edges = span.edges
    n = len(edges) - 1
    columns: dict[int, np.ndarray] = {}
    for frame in frames:
        if field not in frame.fields:
            continue
        buckets = np.searchsorted(edges, frame.time_ns, side="right") - 1
        ranks = frame.tags["rank"].astype(np.int64)
        values = frame.fields[field].astype(np.float64)
        ok = (buckets >= 0) & (buckets < n) & np.isfinite(values)
        for rank in np.unique(ranks[ok]).tolist():
            mask = ok & (ranks == rank)
            sums = np.bincount(buckets[mask], weights=values[mask], minlength=n)
            counts = np.bincount(buckets[mask], minlength=n)
            column = columns.setdefault(int(rank), np.full(n, np.nan))
            seen = counts > 0
            column[seen] = sums[seen] / counts[seen]
    return columns


def _timeline(
    source: TimelineSource,
    signal: str,
    entity: str,
    label: str,
    span: Range,
    onset_ns: int,
    own: np.ndarray,
    peer_rows: list[np.ndarray],
    peer_label: str,
    floor: float,
) -> Timeline:
    times = span.edges[1:]  # a bucket is plotted at its end, as the flow stamps its windows
    n = len(times)
    if peer_rows:
        peers = np.vstack(peer_rows)
        with np.errstate(all="ignore"):
            enough = np.sum(np.isfinite(peers), axis=0) > 0
            quantiles = np.full((3, n), np.nan)
            if enough.any():
                quantiles[:, enough] = np.nanpercentile(peers[:, enough], [50, 10, 90], axis=0)
    else:
        quantiles = np.full((3, n), np.nan)
    center, spread, origin = _stored_baseline(source, signal, entity, span, times)
    if origin == "":
        center, spread, origin = _history_baseline(own, times, onset_ns, floor)
    return Timeline(
        signal, entity, label, times, own, quantiles[0], quantiles[1], quantiles[2],
        len(peer_rows), peer_label, center, spread, origin, onset_ns,
    )  # fmt: skip


def _stored_baseline(
    source: TimelineSource, signal: str, entity: str, span: Range, times: np.ndarray
) -> tuple[np.ndarray, np.ndarray, str]:
    """The flow's own ``reflex_baseline`` points, stepped onto the buckets, where stored: the
    baseline under load (what a part of a running job is judged against), or the one baseline
    of an entity whose node sent no GPU utilization."""
    node, component, index = entity.split("|")
    nan = np.full(len(times), np.nan)
    rows_t, rows_c, rows_s = [], [], []
    for frame in source.frames("reflex_baseline", span.start_ns, span.end_ns, nodes=[node]):
        if "center" not in frame.fields or "scale" not in frame.fields:
            continue
        mask = (
            (frame.tags["component"] == component)
            & (frame.tags["index"] == index)
            & (frame.tags["signal"] == signal)
        )
        if "state" in frame.tags:
            mask &= np.isin(frame.tags["state"], ["busy", "any"])
        rows_t.append(frame.time_ns[mask])
        rows_c.append(frame.fields["center"][mask])
        rows_s.append(frame.fields["scale"][mask])
    if not rows_t or not sum(len(t) for t in rows_t):
        return nan, nan.copy(), ""
    t = np.concatenate(rows_t)
    order = np.argsort(t, kind="stable")
    t, c, s = t[order], np.concatenate(rows_c)[order], np.concatenate(rows_s)[order]
    at = np.searchsorted(t, times, side="right") - 1
    known = at >= 0
    center, spread = nan.copy(), nan.copy()
    center[known], spread[known] = c[at[known]], s[at[known]]
    return center, spread, "reflex_baseline (the flow's stored baseline)"


def _history_baseline(
    own: np.ndarray, times: np.ndarray, onset_ns: int, floor: float
) -> tuple[np.ndarray, np.ndarray, str]:
    """Median and MAD-spread of the entity's own values before the onset."""
    before = own[(times < onset_ns) & np.isfinite(own)]
    nan = np.full(len(times), np.nan)
    if len(before) < 3:
        return nan, nan.copy(), ""
    center = float(np.median(before))
    spread = max(MAD_TO_SIGMA * float(np.median(np.abs(before - center))), floor)
    return (
        np.full(len(times), center),
        np.full(len(times), spread),
        "own history before the onset (median \u00b1 robust spread)",
    )


# ---- job step time per pipeline stage -----------------------------------------------------------


@dataclass
class StageTimes:
    """Median compute and step time per pipeline stage and bucket."""

    times_ns: np.ndarray
    compute: dict[int, np.ndarray]
    step_time: np.ndarray
    ranks: dict[int, int]


def stage_times(
    source: TimelineSource, job: str, members: list[Member], span: Range
) -> StageTimes | None:
    frames = source.frames("train_step", span.start_ns, span.end_ns, job=job)
    compute = _rank_columns(frames, "compute_seconds", span)
    step = _rank_columns(frames, "step_time_seconds", span)
    if not step:
        return None
    stage_of = {m.rank: m.pp_rank for m in members}
    stages = sorted({stage_of.get(r, 0) for r in step})
    per_stage: dict[int, np.ndarray] = {}
    with np.errstate(all="ignore"):
        for stage in stages:
            rows = [c for r, c in compute.items() if stage_of.get(r, 0) == stage]
            if rows:
                per_stage[stage] = _nanmedian_rows(np.vstack(rows))
        all_steps = _nanmedian_rows(np.vstack(list(step.values())))
    ranks = {s: sum(1 for r in step if stage_of.get(r, 0) == s) for s in stages}
    return StageTimes(span.edges[1:], per_stage, all_steps, ranks)


def _nanmedian_rows(rows: np.ndarray) -> np.ndarray:
    out = np.full(rows.shape[1], np.nan)
    seen = np.isfinite(rows).any(axis=0)
    out[seen] = np.nanmedian(rows[:, seen], axis=0)
    return out


# ---- the event log ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoggedEvent:
    time_ns: int
    node: str
    source: str
    kind: str
    code: int | None
    message: str


def logged_events(source: TimelineSource, nodes: Sequence[str], span: Range) -> list[LoggedEvent]:
    """Events (XID, link down, NCCL timeout, kmsg lines...) of ``nodes``, oldest first."""
    out = []
    for frame in source.frames("event", span.start_ns, span.end_ns, nodes=list(nodes)):
        for row in range(len(frame)):
            code = frame.fields.get("code")
            message = frame.fields.get("message")
            out.append(
                LoggedEvent(
                    int(frame.time_ns[row]),
                    str(frame.tags["node"][row]),
                    str(frame.tags["source"][row]),
                    str(frame.tags["kind"][row]),
                    int(code[row]) if code is not None else None,
                    str(message[row]) if message is not None else "",
                )
            )
    out.sort(key=lambda e: (e.time_ns, e.node))
    return out
