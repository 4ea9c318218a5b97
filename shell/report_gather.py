"""What one incident report shows, gathered from a timeline source.

For the event's top suspect: its strongest plottable signals against its peers and its own
baseline, the explicit errors to mark, the events its nodes (and, for an explicit error, the
whole job) logged, and the cascade the telemetry shows after the root; without a suspect, or
with nothing to plot, the job's step time per pipeline stage.

>>> from reflex_localize.flows.incidents.events import LocalizationEvent
>>> from reflex_localize.shell.report_sources import FrameSource
>>> event = LocalizationEvent("e1", 10**18, "sim", "job-1", "regression", "info", 0.6, [],
...                           "no hardware action", "imbalance")
>>> data = gather(event, FrameSource([]), BUCKET_S)
>>> data.onset_ns == event.time_ns, data.timelines, data.stages
(True, [], None)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from reflex_localize.flows.incidents.events import Evidence, LocalizationEvent, Suspect
from reflex_localize.flows.signals.derive import SIGNALS, STEP_SIGNAL
from reflex_localize.shell.report_sources import TimelineSource
from reflex_localize.shell.report_timeline import (
    LoggedEvent,
    Member,
    Range,
    StageTimes,
    Timeline,
    job_members,
    logged_events,
    signal_timeline,
    stage_times,
    step_timeline,
)

LOOKBACK_S = 300.0  # history shown (and used as the own baseline) before the onset
AFTER_S = 90.0  # NCCL watchdogs fire 30-60 s after the root error
NO_HARDWARE_LOOKBACK_S = 600.0
BUCKET_S = 10.0  # the flow's window
MAX_SIGNALS = 2
MAX_LOG_ROWS = 25


@dataclass
class ReportData:
    """What one report shows, gathered from a timeline source."""

    event: LocalizationEvent
    span: Range
    onset_ns: int
    members: list[Member]
    timelines: list[Timeline]
    stages: StageTimes | None
    log: list[LoggedEvent]
    markers: list[tuple[int, str]]  # explicit evidence: (time, signal)
    observed_cascade: ObservedCascade | None


@dataclass(frozen=True)
class ObservedCascade:
    """Errors on the job's other nodes after the root, as the telemetry shows them now (the
    event itself fires before most of the cascade has arrived)."""

    events: int
    nodes: int
    kinds: str
    first_ns: int


def onset_of(event: LocalizationEvent) -> int:
    """When the incident began: the earliest evidence of the top suspect, or the first error."""
    times = [e.since_ns for e in event.top.evidence] if event.top else []
    first = event.cascade.get("first_ns")
    if isinstance(first, int):
        times.append(first)
    return min([*times, event.time_ns])


def gather(event: LocalizationEvent, source: TimelineSource, bucket_s: float) -> ReportData:
    bucket_ns = int(bucket_s * 1e9)
    onset = onset_of(event)
    lookback = LOOKBACK_S if event.top else NO_HARDWARE_LOOKBACK_S
    span = Range(onset - int(lookback * 1e9), event.time_ns + int(AFTER_S * 1e9), bucket_ns)
    members = job_members(source, event.job, span.start_ns, span.end_ns)
    top = event.top
    timelines: list[Timeline] = []
    markers: list[tuple[int, str]] = []
    log: list[LoggedEvent] = []
    stages, cascade = None, None
    if top is not None:
        timelines = _suspect_timelines(source, event.job, top, members, span, onset)
        markers = [(e.since_ns, e.signal) for e in top.evidence if is_explicit(e)]
        explicit = top.role == "root" or bool(event.cascade)
        nodes = _suspect_nodes(event) + ([m.node for m in members] if explicit else [])
        log = logged_events(source, list(dict.fromkeys(nodes)), span)
        cascade = _observed_cascade(log, top, onset) if explicit else None
    if top is None or not timelines:
        stages = stage_times(source, event.job, members, span)
    return ReportData(
        event, span, onset, members, timelines, stages, log[:MAX_LOG_ROWS], markers, cascade
    )


def _observed_cascade(log: list[LoggedEvent], root: Suspect, onset: int) -> ObservedCascade | None:
    after = [e for e in log if e.node != root.node and e.time_ns >= onset]
    if not after:
        return None
    kinds = Counter(e.kind for e in after)
    return ObservedCascade(
        len(after),
        len({e.node for e in after}),
        ", ".join(f"{kind} \u00d7{count}" for kind, count in kinds.most_common()),
        after[0].time_ns,
    )


def is_explicit(evidence: Evidence) -> bool:
    """An error the telemetry states outright (an XID, a link down), not a plottable signal."""
    return evidence.signal not in SIGNALS and evidence.signal != STEP_SIGNAL


def _suspect_nodes(event: LocalizationEvent) -> list[str]:
    return list(dict.fromkeys(s.node for s in event.suspects[:3]))


def _suspect_timelines(
    source: TimelineSource,
    job: str,
    top: Suspect,
    members: list[Member],
    span: Range,
    onset: int,
) -> list[Timeline]:
    """The strongest plottable evidence signals; for an explicit error with none, the
    suspect rank's step compute time, which shows when it stopped."""
    ranked = sorted(top.evidence, key=lambda e: -e.weight)
    signals = [e.signal for e in ranked if not is_explicit(e)]
    out = []
    for signal in signals:
        timeline = signal_timeline(source, job, signal, top.entity, members, span, onset)
        if timeline is not None:
            out.append(timeline)
        if len(out) == MAX_SIGNALS:
            break
    if not out:
        fallback = step_timeline(source, job, top.entity, members, span, onset)
        out = [fallback] if fallback is not None else []
    return out
