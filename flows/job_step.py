"""The per-job step: peers, compound score, triggers and localization events.

Windows from every shard that runs part of the job are gathered first, then processed in
window order, so that one process or many produce the same events.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from flows.detectors import CompoundScore, evidence_strength, peer_deviation
from flows.events import Evidence, LocalizationEvent, Suspect, event_id, recommend_action
from flows.messages import ExplicitEvent, JobWindow, RankInfo
from flows.shard_step import FLOORS
from flows.signals import SIGNAL_NAMES, SIGNALS, STEP_SIGNAL
from flows.thresholds import threshold_hits
from flows.triggers import HangDetector, StepRegression
from schemas.codec import Point
from schemas.hardware_profiles import load_profiles

DIRECTION = np.array([SIGNALS[name].direction for name in SIGNAL_NAMES], dtype=np.float64)
RECENT_WINDOWS = 3  # evidence this recent makes an entity a current suspect
EXPLICIT_EVIDENCE = {"critical": 6.0, "warning": 2.0}
_DEFAULT_PROFILE = "h100-sxm5-80gb"


def default_weights() -> dict[str, dict[str, float]]:
    return {name: dict(p.weights) for name, p in load_profiles().items()}


MODES = ("reflex", "peer_only", "temporal_only", "threshold")


@dataclass
class JobConfig:
    """``mode`` selects Reflex or one of the baselines it is evaluated against:
    ``peer_only`` (Minder-style spatial similarity), ``temporal_only`` (own history only) and
    ``threshold`` (static per-metric rules, DCGM-health-check style)."""

    mode: str = "reflex"
    window_seconds: float = 10.0
    cluster: str = "sim"
    cooldown_s: float = 900.0
    hang_timeout_s: float = 60.0
    min_suspect_score: float = 3.0
    score_export_min: float = 0.05
    max_pending_windows: int = 6  # process a window anyway once this many are waiting
    weights: dict[str, dict[str, float]] = field(default_factory=default_weights)
    # Receives (job, window end, entity -> signal -> unweighted evidence): `reflex fit` uses it.
    recorder: Callable[[str, int, dict[str, dict[str, float]]], None] | None = None


@dataclass
class JobState:
    job: str
    config: JobConfig
    pending: dict[int, dict[str, JobWindow]] = field(default_factory=dict)
    members: dict[int, RankInfo] = field(default_factory=dict)
    shards: set[str] = field(default_factory=set)
    world_size: int = 0
    compound: CompoundScore = field(default_factory=CompoundScore)
    regression: StepRegression = field(default_factory=StepRegression)
    hang: HangDetector = field(default_factory=HangDetector)
    since: dict[tuple[str, str], int] = field(default_factory=dict)
    evidence: dict[str, list[Evidence]] = field(default_factory=dict)
    recent_events: list[ExplicitEvent] = field(default_factory=list)
    cascade_waiting: int = -1  # window at which only cascade errors were seen
    last_event_ns: int = -(10**19)
    last_event_nodes: set[str] = field(default_factory=set)
    last_event_entities: set[str] = field(default_factory=set)
    last_evidence: dict[str, int] = field(default_factory=dict)  # entity -> last window
    fresh: set[str] = field(default_factory=set)  # entities with recent evidence
    features: dict[str, dict[str, float]] = field(default_factory=dict)  # this window
    stage_compute: dict[int, float] = field(default_factory=dict)
    stage_now: dict[int, float] = field(default_factory=dict)
    alerted: dict[str, int] = field(default_factory=dict)  # threshold mode: entity -> last alert
    last_done: int = -1
    finished: bool = False

    def __post_init__(self) -> None:
        self.hang.timeout_s = self.config.hang_timeout_s

    # ---- ordering ---------------------------------------------------------------------------

    def on_window(self, part: JobWindow) -> list[tuple[str, object]]:
        self.job = self.job or part.job  # Bytewax builds state without the key
        if part.window <= self.last_done:
            return []  # a replayed window after recovery: already processed
        self.pending.setdefault(part.window, {})[part.shard] = part
        if part.members:
            self.shards.add(part.shard)
        for info in part.members:
            self.members[info.rank] = info
        self.world_size = max(self.world_size, part.world_size)
        out: list[tuple[str, object]] = []
        while self.pending:
            window = min(self.pending)
            ready = self._complete(self.pending[window])
            if not ready and len(self.pending) < self.config.max_pending_windows:
                break
            out.extend(self._process(window, list(self.pending.pop(window).values())))
        return out

    def on_eof(self) -> list[tuple[str, object]]:
        out: list[tuple[str, object]] = []
        for window in sorted(self.pending):
            out.extend(self._process(window, list(self.pending.pop(window).values())))
        return out

    def _complete(self, parts: dict[str, JobWindow]) -> bool:
        members_known = self.world_size > 0 and len(self.members) >= self.world_size
        return members_known and self.shards <= set(parts)

    # ---- one window -------------------------------------------------------------------------

    def _process(self, window: int, parts: list[JobWindow]) -> list[tuple[str, object]]:
        self.last_done = window
        parts.sort(key=lambda p: p.shard)
        end_ns = max(p.end_ns for p in parts)
        entities = np.concatenate([p.entities for p in parts])
        values = (
            np.vstack([p.values for p in parts])
            if len(entities)
            else np.zeros((0, len(SIGNAL_NAMES)))
        )
        temporal = np.vstack([p.temporal_z for p in parts]) if len(entities) else values
        scales = np.vstack([p.scales for p in parts]) if len(entities) else values
        profiles = np.concatenate([p.profiles for p in parts])
        events = sorted((e for p in parts for e in p.events), key=lambda e: (e.time_ns, e.node))
        if self.config.mode == "threshold":
            return self._threshold_alerts(window, end_ns, entities, values, profiles, events)
        totals: dict[str, float] = {}
        self.features = {}
        self._signal_evidence(entities, values, temporal, scales, profiles, end_ns, totals)
        self._step_evidence(parts, end_ns, totals)
        self._explicit_evidence(events, totals)
        for entity, amount in totals.items():
            if amount > 0:
                self.last_evidence[entity] = window
        self.fresh = {e for e, w in self.last_evidence.items() if window - w <= RECENT_WINDOWS}
        self.last_evidence = {e: self.last_evidence[e] for e in self.fresh}
        if self.config.recorder is not None:
            self.config.recorder(self.job, end_ns, self.features)
        keys = np.array(sorted(totals), dtype=object)
        self.compound.update(keys, np.array([totals[k] for k in keys.tolist()]))
        out: list[tuple[str, object]] = [("points", self._score_points(end_ns))]
        self.recent_events = [
            e for e in self.recent_events + events if e.time_ns >= end_ns - 300 * 10**9
        ]
        event = self._triggered(window, end_ns, parts, events)
        if event is not None:
            out.append(("event", event))
        if parts and not any(p.active for p in parts):
            self.finished = True
        return out

    def _threshold_alerts(
        self,
        window: int,
        end_ns: int,
        entities: np.ndarray,
        values: np.ndarray,
        profiles: np.ndarray,
        events: list[ExplicitEvent],
    ) -> list[tuple[str, object]]:
        """Static rules alert per entity, each time a rule breaks outside its cooldown."""
        hits = threshold_hits(entities, values, profiles) if len(entities) else []
        hits += [(e.entity, f"{e.kind}:{e.code}") for e in events if e.severity != "application"]
        out: list[tuple[str, object]] = []
        for entity, signal in hits:
            last = self.alerted.get(entity)
            if last is not None and end_ns - last < self.config.cooldown_s * 1e9:
                continue
            self.alerted[entity] = end_ns
            node, component, index = entity.split("|")
            suspect = Suspect(
                node, component, index, 1.0, [Evidence(signal, None, None, 1.0, end_ns)]
            )
            out.append(
                (
                    "event",
                    LocalizationEvent(
                        event_id(self.job, "threshold", window, entity),
                        end_ns,
                        self.config.cluster,
                        self.job,
                        "threshold",
                        "warning",
                        1.0,
                        [suspect],
                        recommend_action(component, signal),
                        f"{signal} on {entity}",
                    ),
                )
            )
        return out

    def _roles(self) -> tuple[dict[str, int], dict[str, int]]:
        gpu_stage = {f"{i.node}|gpu|{i.gpu}": i.pp_rank for i in self.members.values()}
        by_node: dict[str, Counter] = {}
        for info in self.members.values():
            by_node.setdefault(info.node, Counter())[info.pp_rank] += 1
        node_stage = {node: counts.most_common(1)[0][0] for node, counts in by_node.items()}
        return gpu_stage, node_stage

    def _signal_evidence(
        self,
        entities: np.ndarray,
        values: np.ndarray,
        temporal: np.ndarray,
        scales: np.ndarray,
        profiles: np.ndarray,
        end_ns: int,
        totals: dict[str, float],
    ) -> None:
        if not len(entities):
            return
        gpu_stage, node_stage = self._roles()
        groups = np.array(
            [
                f"{e.split('|')[1]}|{gpu_stage.get(e, node_stage.get(e.split('|', 1)[0], -1))}|{p}"
                for e, p in zip(entities.tolist(), profiles.tolist(), strict=True)
            ],
            dtype=object,
        )
        peer = peer_deviation(values, groups, FLOORS, pooled_scale=scales)
        own, peers = DIRECTION * temporal, DIRECTION * peer
        combined = combine_deviations(own, peers, self.config.mode)
        strength = evidence_strength(combined)
        weights = np.array(
            [[self._weights(p).get(s, 0.0) for s in SIGNAL_NAMES] for p in profiles.tolist()]
        )
        amount = strength * weights
        for row in np.flatnonzero(strength.sum(axis=1) > 0):
            self.features[entities[row]] = {
                SIGNAL_NAMES[c]: float(strength[row, c]) for c in np.flatnonzero(strength[row])
            }
        for row in np.flatnonzero(amount.sum(axis=1) > 0):
            entity = entities[row]
            totals[entity] = totals.get(entity, 0.0) + float(amount[row].sum())
            for col in np.flatnonzero(amount[row] > 0):
                signal = SIGNAL_NAMES[col]
                since = self.since.setdefault((entity, signal), end_ns)
                self._note(
                    entity,
                    Evidence(
                        signal,
                        _num(temporal[row, col]),
                        _num(peer[row, col]),
                        float(amount[row, col]),
                        since,
                    ),
                )
        for row, col in zip(*np.nonzero(amount == 0), strict=True):
            self.since.pop((entities[row], SIGNAL_NAMES[col]), None)

    def _weights(self, profile: str) -> dict[str, float]:
        return self.config.weights.get(profile) or self.config.weights.get(_DEFAULT_PROFILE, {})

    def _note(self, entity: str, evidence: Evidence) -> None:
        notes = [e for e in self.evidence.get(entity, []) if e.signal != evidence.signal]
        self.evidence[entity] = [*notes, evidence]

    def _step_evidence(self, parts: list[JobWindow], end_ns: int, totals: dict[str, float]) -> None:
        ranks = np.concatenate([p.steps.rank for p in parts])
        if not len(ranks):
            return
        compute = np.concatenate([p.steps.compute for p in parts])
        unique, inverse = np.unique(ranks, return_inverse=True)
        counts = np.bincount(inverse)
        mean = np.bincount(inverse, weights=np.nan_to_num(compute)) / counts
        infos = [self.members.get(int(r)) for r in unique.tolist()]
        known = np.array([i is not None for i in infos])
        if known.sum() < 4:
            return
        infos_known = [i for i in infos if i is not None]
        groups = np.array([f"{i.pp_rank}|{i.profile}" for i in infos_known], dtype=object)
        values = mean[known][:, None]
        floor = np.array([max(0.02 * float(np.median(values)), 1e-3)])
        z = peer_deviation(values, groups, floor)[:, 0]
        strength = evidence_strength(z)
        slow = [
            (i, st, zz)
            for i, st, zz in zip(infos_known, strength.tolist(), z.tolist(), strict=True)
            if st > 0
        ]
        for info in infos_known:
            if not any(info is i for i, _, _ in slow):
                self.since.pop((f"{info.node}|gpu|{info.gpu}", STEP_SIGNAL), None)
        for entity, placed, peer_z, profile in self._place_step_evidence(slow, infos_known, totals):
            self.features.setdefault(entity, {})[STEP_SIGNAL] = placed
            amount = placed * self._weights(profile).get(STEP_SIGNAL, 1.0)
            totals[entity] = totals.get(entity, 0.0) + amount
            since = self.since.setdefault((entity, STEP_SIGNAL), end_ns)
            self._note(entity, Evidence(STEP_SIGNAL, None, peer_z, amount, since))

    def _place_step_evidence(
        self,
        slow: list[tuple[RankInfo, float, float]],
        ranks: list[RankInfo],
        totals: dict[str, float],
    ) -> list[tuple[str, float, float | None, str]]:
        """Which entity a straggling rank blames. One slow GPU among healthy ones on its node
        is the GPU's own doing. When most GPUs of a node straggle together, the cause is
        shared: the node's NIC or host, whichever already shows evidence (the host when
        neither does: dataloader, I/O and CPU stalls leave few other traces)."""
        per_node: dict[str, list[tuple[RankInfo, float, float]]] = {}
        for item in slow:
            per_node.setdefault(item[0].node, []).append(item)
        gpus_on_node = Counter(info.node for info in ranks)
        placed: list[tuple[str, float, float | None, str]] = []
        for node, items in sorted(per_node.items()):
            if len(items) < 0.75 * gpus_on_node[node] or len(items) < 2:
                placed += [
                    (f"{i.node}|gpu|{i.gpu}", st, _num(zz), i.profile) for i, st, zz in items
                ]
                continue
            shared = [e for e in totals if e.startswith(f"{node}|") and "|gpu|" not in e]
            target = max(shared, key=lambda e: totals[e]) if shared else f"{node}|host|-"
            strongest = max(items, key=lambda item: item[1])
            placed.append((target, strongest[1], _num(strongest[2]), strongest[0].profile))
        return placed

    def _explicit_evidence(self, events: list[ExplicitEvent], totals: dict[str, float]) -> None:
        for event in events:
            amount = EXPLICIT_EVIDENCE.get(event.severity, 0.0)
            if amount and not event.is_cascade:
                totals[event.entity] = totals.get(event.entity, 0.0) + amount
                self._note(
                    event.entity,
                    Evidence(f"{event.kind}:{event.code}", None, None, amount, event.time_ns),
                )

    def _score_points(self, end_ns: int) -> list[Point]:
        points = []
        for entity, score in sorted(self.compound.scores.items()):
            if score < self.config.score_export_min:
                continue
            node, component, index = entity.split("|")
            notes = sorted(self.evidence.get(entity, []), key=lambda e: -e.weight)
            points.append(
                Point(
                    "reflex_score",
                    {
                        "cluster": self.config.cluster,
                        "node": node,
                        "component": component,
                        "index": index,
                    },
                    {
                        "score": float(score),
                        "top_signal": notes[0].signal if notes else "",
                        "evidence": json.dumps({e.signal: round(e.weight, 3) for e in notes[:5]}),
                        "job": self.job,
                    },
                    end_ns,
                )
            )
        return points

    # ---- triggers and localization ------------------------------------------------------------

    def _triggered(
        self, window: int, end_ns: int, parts: list[JobWindow], events: list[ExplicitEvent]
    ) -> LocalizationEvent | None:
        # Critical errors trigger. A warning (a remap recorded, a corrected MCE) triggers only
        # when its entity's compound score corroborates it; otherwise it is just evidence.
        hardware = [
            e
            for e in events
            if not e.is_cascade
            and (
                e.severity == "critical"
                or (
                    e.severity == "warning"
                    and self.compound.get(e.entity) >= 2 * self.config.min_suspect_score
                )
            )
        ]
        cascade = [e for e in events if e.is_cascade]
        step_times = np.concatenate([p.steps.step_time for p in parts])
        steps = np.concatenate([p.steps.step for p in parts])
        regressed = bool(len(step_times)) and self.regression.update(
            float(np.nanmedian(step_times))
        )
        alive = any(p.alive_nodes for p in parts)
        max_step = int(steps.max()) if len(steps) else self.hang.last_step
        hung = self.hang.update(max_step, alive, end_ns)
        self._learn_stages(parts, regressed)
        if hardware:
            return self._emit(window, end_ns, "explicit", hardware[0])
        if cascade and self.cascade_waiting < 0:
            self.cascade_waiting = window
            return None
        if self.cascade_waiting >= 0 and window > self.cascade_waiting:
            self.cascade_waiting = -1
            return self._emit(window, end_ns, "explicit", None)
        if hung:
            return self._emit(window, end_ns, "hang", None)
        if regressed:
            self.regression.reset()
            return self._emit(window, end_ns, "regression", None)
        return None

    def _learn_stages(self, parts: list[JobWindow], regressed: bool) -> None:
        now = self._stage_compute(parts)
        if now:
            self.stage_now = now
        if regressed or self.regression.cusum > 0:
            return
        for stage, value in now.items():
            old = self.stage_compute.get(stage, value)
            self.stage_compute[stage] = 0.8 * old + 0.2 * value

    def _stage_compute(self, parts: list[JobWindow]) -> dict[int, float]:
        ranks = np.concatenate([p.steps.rank for p in parts])
        compute = np.concatenate([p.steps.compute for p in parts])
        by_stage: dict[int, list[float]] = {}
        for rank, value in zip(ranks.tolist(), compute.tolist(), strict=True):
            info = self.members.get(int(rank))
            if info is not None and np.isfinite(value):
                by_stage.setdefault(info.pp_rank, []).append(value)
        return {stage: float(np.median(v)) for stage, v in by_stage.items()}

    def _emit(
        self, window: int, end_ns: int, trigger: str, root: ExplicitEvent | None
    ) -> LocalizationEvent | None:
        suspects = self._suspects(root)
        top = suspects[0] if suspects else None
        in_cooldown = end_ns - self.last_event_ns < self.config.cooldown_s * 1e9
        # One incident, one event: within the cooldown only an explicit error on a new node
        # opens a new incident; slowdowns, hangs and cascades belong to the open one.
        if in_cooldown and not self._new_incident(root, top):
            return None
        if top is not None and root is None and top.score < self.config.min_suspect_score:
            suspects, top = [], None
        event = self._describe(window, end_ns, trigger, root, suspects)
        self.last_event_ns = end_ns
        self.last_event_nodes = {s.node for s in suspects[:1]}
        self.last_event_entities = {s.entity for s in suspects[:1]}
        self.regression.reset()
        return event

    def _new_incident(self, root: ExplicitEvent | None, top: Suspect | None) -> bool:
        """Within the cooldown, only a different node opens a new incident: through an explicit
        error, or through strong evidence once the previous suspect shows no fresh evidence."""
        if root is not None:
            return root.node not in self.last_event_nodes
        if top is None or top.node in self.last_event_nodes:
            return False
        previous_active = bool(self.last_event_entities & self.fresh)
        return not previous_active and top.score >= 2 * self.config.min_suspect_score

    def _suspects(self, root: ExplicitEvent | None) -> list[Suspect]:
        # Entities with recent evidence come first: a decaying score from an earlier
        # incident must not outrank what is going wrong now.
        ranked = sorted(
            self.compound.scores.items(), key=lambda kv: (kv[0] not in self.fresh, -kv[1], kv[0])
        )
        suspects = []
        for entity, score in ranked[:5]:
            node, component, index = entity.split("|")
            notes = sorted(self.evidence.get(entity, []), key=lambda e: -e.weight)
            suspects.append(Suspect(node, component, index, round(score, 3), notes[:6]))
        if root is not None:
            suspects = [s for s in suspects if s.entity != root.entity]
            notes = self.evidence.get(root.entity, [])
            root_suspect = Suspect(
                root.node,
                root.component,
                root.index,
                round(self.compound.get(root.entity), 3),
                notes[:6],
                "root",
            )
            suspects.insert(0, root_suspect)
        return suspects

    def _describe(
        self,
        window: int,
        end_ns: int,
        trigger: str,
        root: ExplicitEvent | None,
        suspects: list[Suspect],
    ) -> LocalizationEvent:
        cascade = [e for e in self.recent_events if e.is_cascade]
        cascade_info = {}
        if cascade:
            cascade_info = {
                "events": len(cascade),
                "nodes": len({e.node for e in cascade}),
                "first_ns": cascade[0].time_ns,
                "kind": cascade[0].kind,
            }
        top = suspects[0] if suspects else None
        if root is not None:
            confidence = 0.95 if root.severity == "critical" else 0.7
            severity = "critical" if root.severity == "critical" else "warning"
            action = root.action or recommend_action(root.component, root.kind)
            summary = (
                f"{root.meaning} on {root.node} {root.component} {root.index} "
                f"(first in time); {cascade_info.get('events', 0)} cascade errors on "
                f"{cascade_info.get('nodes', 0)} nodes so far"
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
            action, summary = self._no_hardware_explanation(trigger)
        node = top.node if top else "none"
        return LocalizationEvent(
            event_id(self.job, trigger, window, node),
            end_ns,
            self.config.cluster,
            self.job,
            trigger,
            severity,
            confidence,
            suspects,
            action,
            summary,
            cascade_info,
        )

    def _no_hardware_explanation(self, trigger: str) -> tuple[str, str]:
        if trigger == "explicit":
            cascade = [e for e in self.recent_events if e.is_cascade]
            first = cascade[0] if cascade else None
            where = f"; first: {first.node} rank {first.rank}" if first else ""
            return (
                "no hardware action: read the application log of the first failing rank",
                f"{len(cascade)} process exits / NCCL timeouts with no hardware error "
                f"before them: a software failure{where}",
            )
        if trigger == "hang":
            return (
                "no hardware action found: dump the job's stacks (py-spy) and NCCL state",
                "job stopped making progress with no hardware suspect",
            )
        return (
            "no hardware action: rebalance the pipeline stages or check the data "
            "(sequence lengths, dataloader)",
            f"job slowed with no hardware suspect: {self._stage_pattern()}",
        )

    def _stage_pattern(self) -> str:
        """Compares each pipeline stage's compute now with its learned level: one stage
        slowing on all its ranks is imbalance; every stage slowing together is the data."""
        if not self.stage_now or not self.stage_compute:
            return "no per-stage step data"
        growth = {
            stage: self.stage_now[stage] / self.stage_compute[stage] - 1
            for stage in self.stage_now
            if self.stage_compute.get(stage, 0) > 0
        }
        if not growth:
            return "no per-stage step data"
        worst = max(growth, key=lambda stage: growth[stage])
        others = [g for stage, g in growth.items() if stage != worst]
        if others and growth[worst] > 2 * max(max(others), 0.02):
            return (
                f"pipeline stage {worst} got {100 * growth[worst]:.0f}% slower on all its "
                "ranks: stage imbalance, not a fault"
            )
        return (
            f"every stage slowed together (+{100 * min(growth.values()):.0f}% to "
            f"+{100 * growth[worst]:.0f}%): the work per step grew (e.g. sequence "
            "length), not a fault"
        )


def combine_deviations(own: np.ndarray, peers: np.ndarray, mode: str) -> np.ndarray:
    """Reflex needs a deviation from both the entity's own history and its peers: a job that
    heats every GPU is not one bad GPU, and a GPU that always runs hot is not a new fault.
    While an entity's baseline warms up, its peers alone count, at a discount."""
    if mode == "peer_only":
        return peers
    if mode == "temporal_only":
        return own
    return np.where(np.isnan(own), peers - 1.0, np.fmin(own, peers))


def _num(value: float) -> float | None:
    return None if not np.isfinite(value) else round(float(value), 2)
