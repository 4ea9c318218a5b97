"""`reflex eval`: the scenario library through the flow, scored against ground truth.

Reflex and three baselines (static thresholds, peer-only, own-history-only) run on the same
simulated data. Every event is matched to the simulator's labels:

* a hardware fault is detected by the first event of its job within ``horizon_s`` of onset;
  top-1 / top-3 ask whether that event's first / first three suspects name the faulty node
  (and component, where the label names one). With several faults in one job, every label is
  scored: an event whose first suspect is another label's node (at or after that label's onset)
  answers that label, never this one, so a first fault's events cannot stand for a second's;
  a wrong first answer that a later event of the job corrects within the horizon is counted
  as *named later* (a revision), beside top-1, never instead of it;
* a "no hardware fault" label (pipeline imbalance) is handled correctly when no event of its
  job names a hardware suspect; it is *answered* when an event of its job says so (silence is
  not blaming, but it is not the "no hardware fault" finding either);
* an escalation (a part's warning, then its critical error, naming the same part) is told
  again at its higher severity: it is right, not a second incident;
* a job-wide slowdown that is not hardware and carries no label (``[[benign]]`` slow shared
  storage, a heavier workload, fabric congestion) may be answered at info level: the first
  event of that job saying "no hardware fault" while it lasts (or within ``HORIZON_S`` of its
  end) is right (the info verdict Reflex gives such slowdowns); silence is right too, an event
  that names hardware there is false;
* every other event is a false event, including a second event for the same incident.
Two precisions are kept: the lenient one counts every event a label took (the first event of
its job after onset, whatever it names); the strict one counts an event as right only when it
answers a label correctly (names the faulty part first, or says "no hardware fault" where
none is at fault).

Evaluation families (``simulator/scenarios/families``) run each scenario under several seeds;
there a run that crashes is a finding (every label missed), not the end of the evaluation.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reflex_localize.flows.impact.model import ImpactModel
from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.judge.job_step import JobConfig
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

HORIZON_S = 600.0


@dataclass
class FaultResult:
    scenario: str
    fault_type: str
    fault_class: str
    detected: bool
    top1: bool
    top3: bool
    ttl_s: float | None
    named_later: bool = False  # a later event of the job named it, after a wrong first answer


@dataclass
class ScenarioResult:
    scenario: str
    mode: str
    node_hours: float
    benign_only: bool
    faults: list[FaultResult] = field(default_factory=list)
    true_events: int = 0
    false_events: int = 0
    right_events: int = 0  # events that answer a label correctly (strict precision)
    false_triggers: dict[str, int] = field(default_factory=dict)  # false events by trigger
    # False events that name hardware (not an info "no hardware fault" verdict): what pages.
    false_blaming: int = 0
    imbalance_ok: list[bool] = field(default_factory=list)
    # "No hardware fault" labels answered by an event without hardware suspects (not silence).
    imbalance_answered: list[bool] = field(default_factory=list)
    seed: int = 7
    matches: list[LabelMatch] = field(default_factory=list)
    crashed: str = ""  # the error that stopped the run, if one did


def _component_ok(named: str, expected: str) -> bool:
    return expected in ("node", "none", "") or named == expected


def _names(event: LocalizationEvent, node: str, component: str, depth: int) -> bool:
    return any(
        s.node == node and _component_ok(s.component, component) for s in event.suspects[:depth]
    )


@dataclass
class LabelMatch:
    """One ground-truth label and the event that answered it (or blamed hardware wrongly)."""

    label: Any
    event: LocalizationEvent | None
    correct: bool  # top-1 right for hardware; no hardware suspect named for the others
    revision: LocalizationEvent | None = None  # a later event that named it, if the first did not


_SEVERITY_RANK = {"info": 1, "warning": 2, "critical": 3}


def match_labels(
    truth: list, events: list[LocalizationEvent], right: set[int] | None = None
) -> tuple[list[LabelMatch], set[int]]:
    """Matches labels to events; returns the matches and the indexes of events that count.
    ``right``, when given, receives the indexes of the events that answer a label correctly."""
    right = set() if right is None else right
    used: set[int] = set()
    matches: list[LabelMatch] = []
    hardware = sorted((t for t in truth if t.expect == "hardware"), key=lambda t: t.onset_ns)
    for label in hardware:
        horizon = label.onset_ns + HORIZON_S * 1e9
        found = [
            i
            for i, e in enumerate(events)
            if i not in used
            and e.job == label.job
            and label.onset_ns <= e.time_ns <= horizon
            and not _answers_another(e, label, hardware)
        ]
        first = events[found[0]] if found else None
        if found:
            used.add(found[0])
        correct = first is not None and _names(first, label.node, label.component, 1)
        if first is not None and correct:
            right.add(found[0])
            # An escalation (a remap recorded, then the remap failing) is told again at its
            # higher severity, naming the same part: right, not a second incident.
            escalations = {
                i
                for i in found[1:]
                if _SEVERITY_RANK.get(events[i].severity, 0) > _SEVERITY_RANK.get(first.severity, 0)
                and _names(events[i], label.node, label.component, 1)
            }
            used |= escalations
            right |= escalations
        later = [] if correct else [
            i for i in found[1:] if _names(events[i], label.node, label.component, 1)
        ]  # fmt: skip
        matches.append(LabelMatch(label, first, correct, events[later[0]] if later else None))
    # Benign-only runs carry one "none" label; imbalance and software faults are labelled
    # no_hardware_fault with a real fault type.
    for label in (t for t in truth if t.expect != "hardware" and t.fault_type != "none"):
        mine = [
            i
            for i, e in enumerate(events)
            if i not in used and e.job == label.job and label.onset_ns <= e.time_ns
        ]
        blamed = [i for i in mine if events[i].suspects]
        answered = [i for i in mine if not events[i].suspects]
        used.update(answered)
        right.update(answered)
        shown = events[blamed[0]] if blamed else events[answered[0]] if answered else None
        matches.append(LabelMatch(label, shown, not blamed))
    return matches, used


def _answers_another(event: LocalizationEvent, label: Any, hardware: list) -> bool:
    """The event's first suspect is the node of another fault of the same job, already started,
    and not this label's node: it is that fault's answer (or a repeat of it)."""
    if not event.suspects or event.suspects[0].node == label.node:
        return False
    return any(
        other is not label
        and other.job == label.job
        and other.node == event.suspects[0].node
        and other.onset_ns <= event.time_ns
        for other in hardware
    )


# The ``[[benign]]`` kinds that slow a whole job without a hardware cause.
JOB_SLOWDOWNS = ("storage_slow", "workload_heavier", "congestion")


@dataclass(frozen=True)
class Slowdown:
    """A scheduled job-wide slowdown that is not a fault: ``job`` from ``start_ns`` to
    ``end_ns``."""

    job: str
    start_ns: int
    end_ns: int


def job_slowdowns(scenario: Any) -> list[Slowdown]:
    """The scenario's job-wide benign slowdowns (those a "no hardware fault" may answer)."""
    return [
        Slowdown(
            str(b.job),
            scenario.start_ns + int(b.start_s * 1e9),
            scenario.start_ns + int((b.start_s + b.duration_s) * 1e9),
        )
        for b in scenario.benign
        if b.kind in JOB_SLOWDOWNS
    ]


def _answer_slowdowns(
    slowdowns: list[Slowdown], events: list[LocalizationEvent], used: set[int], right: set[int]
) -> None:
    """The first unused "no hardware fault" event of each slowdown's job, while it lasts or
    within the horizon after, answers it; later ones stay false (the same incident again)."""
    for slow in slowdowns:
        for i, e in enumerate(events):
            if (
                i not in used
                and not e.suspects
                and e.job == slow.job
                and slow.start_ns <= e.time_ns <= slow.end_ns + HORIZON_S * 1e9
            ):
                used.add(i)
                right.add(i)
                break


def score_scenario(
    scenario: str,
    mode: str,
    truth: list,
    events: list[LocalizationEvent],
    node_hours: float,
    slowdowns: list[Slowdown] | None = None,
) -> ScenarioResult:
    right: set[int] = set()
    matches, used = match_labels(truth, events, right)
    _answer_slowdowns(slowdowns or [], events, used, right)
    hardware = [m for m in matches if m.label.expect == "hardware"]
    others = [m for m in matches if m.label.expect != "hardware"]
    result = ScenarioResult(scenario, mode, node_hours, benign_only=not matches)
    for m in hardware:
        label, first = m.label, m.event
        result.faults.append(
            FaultResult(
                scenario,
                label.fault_type,
                label.fault_class,
                first is not None,
                m.correct,
                first is not None and _names(first, label.node, label.component, 3),
                (first.time_ns - label.onset_ns) / 1e9 if first is not None else None,
                m.revision is not None,
            )
        )
    result.imbalance_ok = [m.correct for m in others]
    result.imbalance_answered = [m.correct and m.event is not None for m in others]
    result.true_events = len(used)
    result.false_events = len(events) - len(used)
    result.right_events = len(right)
    for i, event in enumerate(events):
        if i not in used:
            result.false_triggers[event.trigger] = result.false_triggers.get(event.trigger, 0) + 1
            result.false_blaming += bool(event.suspects)
    result.matches = matches
    return result


def run_scenario(
    scenario: str,
    mode: str,
    seed: int = 7,
    window_seconds: float = 10.0,
    weights: dict[str, dict[str, float]] | None = None,
    impact: ImpactModel | None = None,
) -> ScenarioResult:
    from reflex_localize.simulator import Simulation, load_scenario

    sim = Simulation(load_scenario(scenario), seed=seed)
    config = JobConfig(mode=mode, window_seconds=window_seconds, impact=impact)
    if weights:
        config.weights = weights
    run = run_in_process(
        SimulatorSource(scenario, seed, 1, window_seconds),
        window_seconds=window_seconds,
        job_config=config,
    )
    node_hours = len(sim.cluster.nodes) * sim.duration_s / 3600
    result = score_scenario(
        sim.scenario.name, mode, sim.truth, run.events, node_hours, job_slowdowns(sim.scenario)
    )
    result.seed = seed
    return result


def run_family_scenario(
    path: Path,
    mode: str,
    seed: int,
    weights: dict[str, dict[str, float]] | None = None,
    impact: ImpactModel | None = None,
) -> ScenarioResult:
    """:func:`run_scenario` on a family's scenario file; a crash of the flow becomes a result
    whose hardware labels are missed and whose other labels are not answered."""
    from reflex_localize.simulator import Simulation, load_scenario

    try:
        return run_scenario(str(path), mode, seed, weights=weights, impact=impact)
    except Exception as error:  # the flow's crash on this telemetry is what the run found
        sim = Simulation(load_scenario(path), seed=seed)
        node_hours = len(sim.cluster.nodes) * sim.duration_s / 3600
        result = score_scenario(sim.scenario.name, mode, sim.truth, [], node_hours)
        result.imbalance_ok = [False] * len(result.imbalance_ok)
        result.imbalance_answered = [False] * len(result.imbalance_answered)
        result.matches = [LabelMatch(m.label, None, False) for m in result.matches]
        result.seed, result.crashed = seed, f"{type(error).__name__}: {error}"
        return result


@dataclass
class Summary:
    mode: str
    faults: int
    top1: float
    top3: float
    precision: float
    recall: float
    f1: float
    ttl_explicit_p50: float | None
    ttl_explicit_p95: float | None
    ttl_implicit_p50: float | None
    ttl_implicit_p95: float | None
    false_per_1k_node_hours: float | None
    imbalance_ok: str
    by_class: dict[str, float] = field(default_factory=dict)
    by_type: dict[str, str] = field(default_factory=dict)
    crashed: int = 0  # runs that stopped with an error (family runs only)
    imbalance_answered: str = ""
    named_later: str = ""  # faults whose wrong first answer a later event corrected
    strict_precision: float = 0.0  # right events / all events
    # Benign runs' false events per 1,000 node-hours, by the trigger that raised them.
    false_per_1k_by_trigger: dict[str, float] = field(default_factory=dict)
    # Of those, the events that name hardware (the rest say "no hardware fault", at info).
    blaming_per_1k_node_hours: float | None = None


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarize(mode: str, results: list[ScenarioResult]) -> Summary:
    faults = [f for r in results for f in r.faults]
    detected = [f for f in faults if f.detected]
    true_events = sum(r.true_events for r in results)
    false_events = sum(r.false_events for r in results)
    precision = true_events / (true_events + false_events) if true_events + false_events else 0.0
    recall = len(detected) / len(faults) if faults else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    ttl: dict[str, list[float]] = defaultdict(list)
    for f in detected:
        if f.ttl_s is not None:
            ttl[f.fault_class].append(f.ttl_s)
    benign = [r for r in results if r.benign_only and not r.crashed]
    benign_hours = sum(r.node_hours for r in benign)
    by_type: dict[str, list[bool]] = defaultdict(list)
    by_class: dict[str, list[bool]] = defaultdict(list)
    for f in faults:
        by_type[f.fault_type].append(f.top1)
        by_class[f.fault_class].append(f.top1)
    all_events = true_events + false_events
    by_trigger: dict[str, int] = defaultdict(int)
    for r in benign:
        for trigger, count in r.false_triggers.items():
            by_trigger[trigger] += count
    imbalance = [ok for r in results for ok in r.imbalance_ok]
    answered = [ok for r in results for ok in r.imbalance_answered]
    summary = Summary(
        mode,
        len(faults),
        sum(f.top1 for f in faults) / len(faults) if faults else 0.0,
        sum(f.top3 for f in faults) / len(faults) if faults else 0.0,
        precision,
        recall,
        f1,
        _percentile(ttl["explicit"], 0.5),
        _percentile(ttl["explicit"], 0.95),
        _percentile(ttl["implicit"], 0.5),
        _percentile(ttl["implicit"], 0.95),
        1000 * sum(r.false_events for r in benign) / benign_hours if benign_hours else None,
        f"{sum(imbalance)}/{len(imbalance)}",
        {k: statistics.fmean(v) for k, v in sorted(by_class.items())},
        {k: f"{sum(v)}/{len(v)}" for k, v in sorted(by_type.items())},
        sum(1 for r in results if r.crashed),
        f"{sum(answered)}/{len(answered)}",
        f"{sum(f.named_later for f in faults)}/{sum(not f.top1 for f in faults)}",
        sum(r.right_events for r in results) / all_events if all_events else 0.0,
        {t: 1000 * n / benign_hours for t, n in sorted(by_trigger.items())} if benign_hours else {},
    )
    if benign_hours:
        summary.blaming_per_1k_node_hours = (
            1000 * sum(r.false_blaming for r in benign) / benign_hours
        )
    return summary


@dataclass
class PairRow:
    """A moving node's job B, run after job A where the node was faulty (history) and in the
    paired control where job A ran clean (no history): the same fault, the same seed."""

    scenario: str
    seed: int
    mode: str
    fault: str  # the measured label: node, component, index
    ttl_history_s: float | None
    ttl_clean_s: float | None
    top1_history: bool
    top1_clean: bool


def moving_pairs(
    results: list[ScenarioResult], controls: dict[str, tuple[str, str]]
) -> list[PairRow]:
    """Rows for each control run (``controls``: control scenario name -> (the scenario with
    history, the measured job)) whose history run of the same seed and mode is in ``results``."""
    by_key = {(r.scenario, r.seed, r.mode): r for r in results}
    rows = []
    for control in results:
        if control.scenario not in controls:
            continue
        history_name, job = controls[control.scenario]
        history = by_key.get((history_name, control.seed, control.mode))
        if history is None:
            continue
        clean, remembered = _measured(control, job), _measured(history, job)
        if clean is None or remembered is None:
            continue
        label = clean.label
        rows.append(PairRow(
            history_name, control.seed, control.mode,
            " ".join(part for part in (label.node, label.component, label.index) if part),
            _ttl(remembered), _ttl(clean), remembered.correct, clean.correct,
        ))  # fmt: skip
    return rows


def _measured(result: ScenarioResult, job: str) -> LabelMatch | None:
    """The first hardware label of ``job`` in the run, as it was matched."""
    mine = [m for m in result.matches if m.label.expect == "hardware" and m.label.job == job]
    return min(mine, key=lambda m: m.label.onset_ns) if mine else None


def _ttl(match: LabelMatch) -> float | None:
    return (match.event.time_ns - match.label.onset_ns) / 1e9 if match.event else None
