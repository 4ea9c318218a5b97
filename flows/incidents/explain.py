"""The words of a localization event: summary, action, confidence and severity."""

from __future__ import annotations

from datetime import UTC, datetime

from reflex_localize.flows.incidents.events import (
    LocalizationEvent,
    Suspect,
    event_id,
    recommend_action,
)
from reflex_localize.flows.judge.loss_divergence import LOSS_JUMP, LOSS_SIGNAL, spans
from reflex_localize.flows.judge.step_peers import StepFinding
from reflex_localize.flows.messages import ExplicitEvent
from reflex_localize.flows.signals.derive import STEP_SIGNAL


def cascade_summary(recent: list[ExplicitEvent]) -> dict:
    cascade = [e for e in recent if e.is_cascade]
    if not cascade:
        return {}
    return {
        "events": len(cascade),
        "nodes": len({e.node for e in cascade}),
        "first_ns": cascade[0].time_ns,
        "kind": cascade[0].kind,
    }


def describe(
    job: str,
    cluster: str,
    window: int,
    end_ns: int,
    trigger: str,
    root: ExplicitEvent | None,
    suspects: list[Suspect],
    recent: list[ExplicitEvent],
    stage_pattern: str,
) -> LocalizationEvent:
    cascade = cascade_summary(recent)
    top = suspects[0] if suspects else None
    if root is not None:
        confidence = 0.95 if root.severity == "critical" else 0.7
        severity = "critical" if root.severity == "critical" else "warning"
        action = root.action or recommend_action(root.component, root.kind)
        summary = (
            f"{root.meaning} on {root.node} {root.component} {root.index} (first in "
            f"time); {cascade.get('events', 0)} cascade errors on "
            f"{cascade.get('nodes', 0)} nodes so far"
        )
    elif top is not None:
        second = suspects[1].score if len(suspects) > 1 else 0.0
        confidence = round(min(0.95, top.score / (top.score + second + 1.0)), 3)
        severity = "critical" if trigger == "hang" else "warning"
        signal = top.evidence[0].signal if top.evidence else ""
        action = recommend_action(top.component, signal)
        summary = f"job {trigger}: {top.node} {top.component} {top.index} ({signal})"
    else:
        confidence, severity = 0.6, "info"
        action, summary = no_hardware_explanation(trigger, recent, stage_pattern)
    return LocalizationEvent(
        event_id(job, trigger, window, top.node if top else "none"),
        end_ns,
        cluster,
        job,
        trigger,
        severity,
        confidence,
        suspects,
        action,
        summary,
        cascade,
    )


def no_hardware_explanation(
    trigger: str, recent: list[ExplicitEvent], stage_pattern: str
) -> tuple[str, str]:
    if trigger == "explicit":
        cascade = [e for e in recent if e.is_cascade]
        first = cascade[0] if cascade else None
        where = f"; first: {first.node} rank {first.rank}" if first else ""
        return (
            "no hardware action: read the application log of the first failing rank",
            f"{len(cascade)} process exits / NCCL timeouts with no hardware error before "
            f"them: a software failure{where}",
        )
    if trigger == "hang":
        return (
            "no hardware action found: dump the job's stacks (py-spy) and NCCL state (a "
            "checkpoint longer than any the job came back from stalls it the same way, and "
            "ends by itself)",
            "job stopped making progress with no hardware suspect",
        )
    return (
        "no hardware action: rebalance the pipeline stages or check the data (sequence "
        "lengths, dataloader)",
        f"job slowed with no hardware suspect: {stage_pattern}",
    )


def stage_pattern(now: dict[int, float], learned: dict[int, float]) -> str:
    """Compares each pipeline stage's compute now with its learned level: one stage slowing
    on all its ranks is imbalance; every stage slowing together is the data."""
    growth = {stage: now[stage] / learned[stage] - 1 for stage in now if learned.get(stage, 0) > 0}
    if not growth:
        return "no per-stage step data"
    worst = max(growth, key=lambda stage: growth[stage])
    others = [g for stage, g in growth.items() if stage != worst]
    if others and growth[worst] > 2 * max(max(others), 0.02):
        return (
            f"pipeline stage {worst} got {100 * growth[worst]:.0f}% slower on all its "
            "ranks: stage imbalance, not a fault"
        )
    if growth[worst] < 0.02:
        return (
            "no stage computes slower: the steps slowed while communicating or waiting "
            "(fabric congestion, storage, the data loader), with no part to blame"
        )
    return (
        f"every stage slowed together ({100 * min(growth.values()):+.0f}% to "
        f"{100 * growth[worst]:+.0f}%): the work per step grew (e.g. sequence length), "
        "not a fault"
    )


def describe_finding(
    job: str,
    cluster: str,
    window: int,
    end_ns: int,
    kind: str,
    finding: StepFinding,
    suspects: list[Suspect],
    *,
    rank_label: str = "",
    detail: str = "",
) -> LocalizationEvent:
    """Events that need no job history: a straggler found step by step (the suspect leads
    ``suspects``), the job's step pattern (``stage``, ``data``: no hardware fault, below
    paging) and a telemetry gap (no node named)."""
    top = suspects[0] if suspects else None
    trigger = {"stage": "step_pattern", "data": "step_pattern", "stage_hardware": "straggler"}.get(
        kind, kind
    )
    if kind == "straggler" and top is not None:
        since = datetime.fromtimestamp(finding.since_ns / 1e9, tz=UTC).strftime("%H:%M:%S")
        signals = [e.signal for e in top.evidence if e.signal != STEP_SIGNAL]
        severity = "warning"
        confidence = round(min(0.95, 0.55 + 0.1 * finding.steps + 0.01 * min(finding.z, 10)), 3)
        action = recommend_action(top.component, signals[0] if signals else STEP_SIGNAL)
        streak = (
            f"over its latest {finding.steps} steps, from {since} UTC"
            if finding.kind == "marginal"  # a median over steps that may dip
            else f"{finding.steps} steps in a row since {since} UTC"
        )
        summary = (
            f"straggler: {top.node} {top.component} {top.index}: rank {finding.rank} "
            f"({rank_label}) computes {100 * (finding.ratio - 1):.0f}% longer than its stage "
            f"peers, {streak}"
        )
    elif kind == "drift" and top is not None and finding.kind == "carried_drift":
        severity, confidence = "warning", 0.6
        action = recommend_action(top.component, "sm_clock_low")
        summary = (
            f"drift: {top.node} {top.component} {top.index}: rank {finding.rank} "
            f"({rank_label}) computes {100 * (finding.ratio - 1):.1f}% longer than the job's "
            f"level (over its latest {finding.steps} steps), and its GPU's SM clock, with no "
            f"clock reason, is {100 * finding.z:.1f}% below what it held in job {detail}, the "
            "last it served: a fail-slow it brought into this job (power delivery or cooling), "
            "which its peers cannot show where healthy GPUs differ as much"
        )
    elif kind == "drift" and top is not None and finding.kind == "node_drift":
        since = datetime.fromtimestamp(finding.since_ns / 1e9, tz=UTC).strftime("%H:%M:%S")
        severity, confidence = "warning", 0.6
        action = recommend_action(top.component, "sm_clock_low")
        summary = (
            f"drift: {top.node}: the job, on this node alone, computes "
            f"{100 * (finding.ratio - 1):.1f}% longer than it did before {since} UTC (over "
            f"{finding.steps} windows), and its GPUs' SM clock, with no clock reason and no "
            f"more power drawn, is {100 * finding.z:.1f}% below their own: every GPU of the node "
            "at once, a chassis cause (cooling or power), with no peer node to compare"
        )
    elif kind == "drift" and top is not None:
        since = datetime.fromtimestamp(finding.since_ns / 1e9, tz=UTC).strftime("%H:%M:%S")
        severity, confidence = "warning", 0.6
        action = recommend_action(top.component, "sm_clock_low")
        summary = (
            f"drift: {top.node} {top.component} {top.index}: rank {finding.rank} "
            f"({rank_label}) computes {100 * (finding.ratio - 1):.1f}% longer, against the "
            f"job's level, than it did before {since} UTC (over {finding.steps} steps), and "
            f"its GPU's SM clock, with no throttle reason, is {100 * finding.z:.1f}% below its "
            "own: a silent fail-slow (power delivery or cooling), which its peers cannot show "
            "where healthy GPUs differ as much"
        )
    elif kind == "stage_hardware" and top is not None:
        signal = top.evidence[0].signal if top.evidence else ""
        severity, confidence = "warning", 0.75
        action = recommend_action(top.component, signal)
        summary = (
            f"pipeline stage {finding.stage} is {100 * (finding.ratio - 1):.0f}% slower on all "
            f"its ranks, and they run on {top.node}, whose {top.component} {top.index} shows "
            f"{signal} against its peers: hardware, not partitioning"
        )
    elif kind == "comm_straggler" and top is not None:
        signal = next((e.signal for e in top.evidence if e.weight > 0), "")
        severity, confidence = "warning", 0.7
        action = recommend_action(top.component, signal)
        summary = (
            f"communication straggler: {top.node} {top.component} {top.index} ({signal}) "
            f"carries {rank_label}; ranks spend {100 * (finding.ratio - 1):.0f}% of their steps "
            "in collectives and every rank waits on it"
        )
    elif kind == "loss_divergence" and top is not None:
        severity, confidence = "warning", 0.5
        by_node: dict[str, list[int]] = {}
        for s in suspects:
            if s.index.isdigit() and any(e.signal == LOSS_SIGNAL for e in s.evidence):
                by_node.setdefault(s.node, []).append(int(s.index))
        gpus = "; ".join(f"{node} GPU {spans(i)}" for node, i in by_node.items())
        action = (
            f"silent data corruption suspected: run DCGM diagnostics (level 3) or the vendor's "
            f"field diagnostic on {gpus} before they rejoin; resume from a checkpoint before "
            f"step {finding.at_step}. If they pass, look at the batch that step served"
        )
        summary = (
            f"loss of ranks {rank_label} (one data-parallel replica) jumped to over "
            f"{LOSS_JUMP:.0f}x the other replicas' at step {finding.at_step}, before the rest of "
            "the job: silent data corruption on one of its GPUs, or a bad batch"
        )
    elif kind == "stage":
        severity, confidence = "info", 0.7
        action = (
            f"no hardware action: rebalance the pipeline (move layers off stage {finding.stage})"
        )
        summary = (
            f"no hardware fault: pipeline stage {finding.stage} is "
            f"{100 * (finding.ratio - 1):.0f}% slower than the other stages on all its ranks: "
            "partitioning, not a fault"
        )
    elif kind == "data":
        severity, confidence = "info", 0.6
        action = "no hardware action: check the data (sequence-length packing, the dataloader)"
        summary = (
            "no single slow rank: step time follows the data (the slowest rank changes from "
            "step to step, or every rank's compute moves together), not a fault"
        )
    else:
        severity, confidence = "warning", 0.6
        action = "check the agents and the path to InfluxDB: no node is blamed for a gap"
        summary = f"telemetry gap, not a node fault: {detail}"
    tag = top.node if top is not None else f"{kind}{finding.stage}"
    return LocalizationEvent(
        event_id(job, trigger, window, tag),
        end_ns,
        cluster,
        job,
        trigger,
        severity,
        confidence,
        suspects,
        action,
        summary,
    )


ORPHAN_JOB = "-"  # the job of an event from a node that runs no known job


def orphan_event(root: ExplicitEvent, cluster: str, window: int) -> LocalizationEvent:
    """An explicit error from a node in no known job (no membership, or between jobs): still
    an event, node-level, its job unknown."""
    suspect = Suspect(root.node, root.component, root.index, 0.0, [], "root")
    event = describe(ORPHAN_JOB, cluster, window, root.time_ns, "explicit", root, [suspect], [], "")
    event.summary = f"{root.meaning} on {root.node} {root.component} {root.index}; no known job"
    return event
