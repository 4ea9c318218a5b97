"""The per-job step: peers, compound score, triggers and localization events.

Windows from every shard that runs part of the job are gathered first, then processed in
window order, so that one process or many produce the same events.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import repeat

import numpy as np

from reflex_localize.flows.impact.model import ImpactModel, impact_rows
from reflex_localize.flows.impact.model_file import ImpactModelFile
from reflex_localize.flows.incidents.events import Evidence, LocalizationEvent, Suspect
from reflex_localize.flows.incidents.exit_messages import hardware_hint
from reflex_localize.flows.incidents.explain import describe, describe_finding, stage_pattern
from reflex_localize.flows.incidents.returning_part import returning_part
from reflex_localize.flows.judge.detectors import CompoundScore
from reflex_localize.flows.judge.explained_straggler import (
    explaining_part,
    learned_enough,
    learned_slowing,
    predicted_slowdown,
)
from reflex_localize.flows.judge.job_evidence import (
    RECORD_MATTERS,
    SLOWING_STATES,
    EvidenceBook,
    place_stragglers,
    rank_entity,
)
from reflex_localize.flows.judge.liveness import LivenessTracker
from reflex_localize.flows.judge.loss_divergence import LOSS_SIGNAL, diverging_ranks, spans
from reflex_localize.flows.judge.site_blame import shared_switch, switch_suspect
from reflex_localize.flows.judge.step_peers import StepFinding, StepPeers
from reflex_localize.flows.judge.thresholds import threshold_events
from reflex_localize.flows.judge.triggers import HangDetector, StepRegression
from reflex_localize.flows.messages import (
    ErrorRecord,
    ExplicitEvent,
    JobWindow,
    RankInfo,
    infer_gpus,
    shard_of,
)
from reflex_localize.flows.signals.derive import SIGNAL_NAMES, STEP_SIGNAL
from reflex_localize.flows.state_upgrade import FieldsFilledOnRestore
from reflex_localize.schemas.codec import Point
from reflex_localize.schemas.hardware_profiles import load_profiles

_NO_STAGE = -(2**62)  # a step row of a rank the job's membership does not know
RECENT_WINDOWS = 3  # evidence this recent makes an entity a current suspect
# See INFO_HOLD_WINDOWS; a part's evidence that slows communication must hold this many
# windows too (_comm_straggler).
HOLD_WINDOWS = 3
# A job slowed with no suspect yet waits HOLD_WINDOWS for its cause's evidence (a straggler
# needs a few of its steps to stand out), then says "no hardware fault" only if the job stays
# slow until INFO_HOLD_WINDOWS: a job-wide wobble of a minute (fabric, storage, the data
# loader) is nothing an SRE can act on, a slowdown that holds two minutes is.
INFO_HOLD_WINDOWS = 12
# A regression names a part only when its evidence has held this many windows before (it was
# seen in PERSIST_WINDOWS + 1 windows in a row).
PERSIST_WINDOWS = 2
# A "no hardware fault" is revised by a suspect that stands out this soon after it; later,
# a suspect is a new incident that needs its own symptom.
REVISE_WINDOWS = 12
# A slowdown with no suspect is told ("no hardware fault") only from this size up.
INFO_MIN_SLOWDOWN = 0.05
# A part an event named that then showed no evidence this long has recovered: if it slows the
# job again within the cooldown, that is a new episode of an intermittent fault (a fail-slow
# that comes and goes), told again as a recurrence, not folded into the first incident.
RECUR_QUIET_S = 120.0
# GPU signals that make a rank compute slower (a stage slow on all its ranks may be these).
_SLOWING_SIGNALS = ("throttle_", "sm_clock_low", "power_low")
# Faults of a part that slow communication (see _comm_straggler), and the share of step time
# in collectives above which a job's communication is worth a straggler of its own.
COMM_FAULTS = (
    "nic_rate_low",
    "nic_link_recovery_rate",
    "nic_link_downed_rate",
    "nic_link_down",
    "nic_speed_low",
    "pcie_downgrade",
    "pcie_gen_low",
    "nvlink_down",
)
COMM_SHARE = 0.05
_DEFAULT_PROFILE = "h100-sxm5-80gb"
_CLOCK_COLUMN = SIGNAL_NAMES.index("sm_clock_low")  # its raw value: the window's mean MHz
DRIFTS = ("drift", "carried_drift")  # against the rank's own history in this job, or its last
# A throttle reason explains a low clock: such windows say nothing of a silent drift. (Holding
# at the power cap is how a loaded GPU runs, not a reason.)
_THROTTLE_COLUMNS = [
    SIGNAL_NAMES.index(name)
    for name in ("throttle_thermal", "throttle_power", "throttle_hw_slowdown")
]
_POWER_CAP_COLUMN = SIGNAL_NAMES.index("throttle_sw_power_cap")


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
    # Live sources: a shard silent this many windows (dead, or its nodes gone) no longer holds
    # the job back. 0 waits for every shard: replays, whose partitions race each other.
    max_pending_windows: int = 0
    weights: dict[str, dict[str, float]] = field(default_factory=default_weights)
    # Receives (job, window end, entity -> signal -> unweighted evidence): `reflex fit` uses it.
    recorder: Callable[[str, int, dict[str, dict[str, float]]], None] | None = None
    # The learned impact model (flows/impact/model.py), and what `reflex fit-impact` learns
    # from: (job, window end, [(a rank's anomaly indicators, its slowdown)]). A live flow holds
    # the file, which a scheduled refit replaces (flows/impact/model_file.py).
    impact: ImpactModel | ImpactModelFile | None = None
    impact_recorder: Callable[[str, int, list[tuple[dict[str, float], float]]], None] | None = None


@dataclass
class JobState(FieldsFilledOnRestore):
    job: str
    config: JobConfig
    pending: dict[int, dict[str, JobWindow]] = field(default_factory=dict)
    members: dict[int, RankInfo] = field(default_factory=dict)
    n_shards: int = 1
    world_size: int = 0
    world_size_told: bool = False
    compound: CompoundScore = field(default_factory=CompoundScore)
    # The share of each part's compound score that corrected errors, and the congestion a
    # port suffered, gave: no sign the part slows the job (see _slowing).
    corrected: CompoundScore = field(default_factory=CompoundScore)
    regression: StepRegression = field(default_factory=StepRegression)
    hang: HangDetector = field(default_factory=HangDetector)
    book: EvidenceBook = field(default_factory=EvidenceBook)
    recent_events: list[ExplicitEvent] = field(default_factory=list)
    cascade_waiting: int = -1  # window at which only cascade errors were seen
    last_event_ns: int = -(10**19)
    last_finding_ns: int = -(10**19)  # the job's step pattern was last told then
    # Nodes and entities the events of the open incidents named (within the cooldown).
    last_event_nodes: set[str] = field(default_factory=set)
    last_event_entities: set[str] = field(default_factory=set)
    # The open incidents' parts last had fresh evidence then, after a quiet gap this long (see
    # RECUR_QUIET_S); when each node an event named was told in this job.
    incident_active_ns: int = -(10**19)
    incident_gap_ns: int = 0
    episodes: dict[str, list[int]] = field(default_factory=dict)
    held_since: int = -1  # window of a regression still waiting for its cause's evidence
    # When the job's step time began to drift up, for the regression that reports it.
    slowdown_onset_ns: int = 2**62
    info_verdict_ns: int = -(10**19)  # a "no hardware fault" was told then; a suspect revises it
    step_now: float = 0.0  # the job's median step time in the latest window with steps
    last_evidence: dict[str, int] = field(default_factory=dict)  # entity -> last window
    fresh: set[str] = field(default_factory=set)  # entities with recent evidence
    stage_compute: dict[int, float] = field(default_factory=dict)
    stage_now: dict[int, float] = field(default_factory=dict)
    liveness: LivenessTracker = field(default_factory=LivenessTracker)
    step_peers: StepPeers = field(default_factory=StepPeers)
    alerted: dict[str, int] = field(default_factory=dict)  # threshold mode: entity -> last alert
    # Records the job's parts came with, as of the job's first window (never this job's own).
    history: dict[str, tuple[float, str]] | None = None
    past_clocks_taken: bool = False  # the ranks' GPU clocks in their last jobs, taken
    sites: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> site tags
    last_done: int = -1
    finished: bool = False

    def __post_init__(self) -> None:
        self.hang.timeout_s = self.config.hang_timeout_s

    # ---- ordering ---------------------------------------------------------------------------

    def on_window(self, part: JobWindow) -> list[tuple[str, object]]:
        self.job = self.job or part.job  # Bytewax builds state without the key
        if part.window <= self.last_done:
            # The window was processed without this shard (it stayed silent too long):
            # counted and reported, never merged into a closed window.
            return [
                (
                    "error",
                    ErrorRecord(
                        "job_step",
                        "shard_window_late",
                        f"{part.job} window {part.window} {part.shard}: arrived after the "
                        "window was processed without it",
                    ),
                )
            ]
        self.pending.setdefault(part.window, {})[part.shard] = part
        self.sites.update(part.sites)
        self.n_shards = part.n_shards
        for info in part.members:
            self.members[info.rank] = info
        self.members = infer_gpus(self.members)
        out: list[tuple[str, object]] = self._check_world_size(part.world_size)
        while self.pending:
            window = min(self.pending)
            ready = self._complete(self.pending[window])
            limit = self.config.max_pending_windows
            if not ready and (limit <= 0 or len(self.pending) < limit):
                break
            out.extend(self._process(window, list(self.pending.pop(window).values())))
        return out

    def _check_world_size(self, declared: int) -> list[tuple[str, object]]:
        """Membership may say fewer ranks than report (a stale or mistyped world size): the
        job goes on with the ranks it sees, and the contradiction is reported once."""
        seen = max(self.members, default=-1) + 1
        self.world_size = max(self.world_size, declared, seen)
        if declared <= 0 or seen <= declared or self.world_size_told:
            return []
        self.world_size_told = True
        detail = f"{self.job}: membership says world size {declared}, ranks up to {seen - 1} report"
        return [("error", ErrorRecord("job_step", "membership_contradiction", detail))]

    def on_eof(self) -> list[tuple[str, object]]:
        out: list[tuple[str, object]] = []
        for window in sorted(self.pending):
            out.extend(self._process(window, list(self.pending.pop(window).values())))
        return out

    def _complete(self, parts: dict[str, JobWindow]) -> bool:
        """Every rank is known, and every shard that runs one has sent this window. The
        expected shards come from membership, not from arrivals, so that one process or many
        process the same windows with the same data."""
        if self.world_size <= 0 or len(self.members) < self.world_size:
            return False
        expected = {f"shard-{shard_of(info.node, self.n_shards)}" for info in self.members.values()}
        return expected <= set(parts)

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
        # A member node that went silent is an explicit event of its own (node_missing).
        missing = self.liveness.observe_windows(parts)
        events = sorted(
            [*(e for p in parts for e in p.events), *missing], key=lambda e: (e.time_ns, e.node)
        )
        if self.config.mode == "threshold":
            return threshold_events(
                self.job,
                self.config.cluster,
                self.config.cooldown_s,
                self.alerted,
                window,
                end_ns,
                entities,
                values,
                profiles,
                events,
            )
        totals: dict[str, float] = {}
        self.book.features = {}
        self.book.signals(
            entities,
            values,
            temporal,
            scales,
            profiles,
            self.members,
            self.config.mode,
            self._weights,
            end_ns,
            totals,
            checkpointing=_checkpointing(parts),
            slowing=learned_slowing(self._learned()),
        )
        self._past_clocks(parts)
        self._observe_clocks(entities, values)
        self.book.stragglers(parts, self.members, self._weights, end_ns, totals)
        corrected: dict[str, float] = {}
        self.book.explicit(events, totals, corrected)
        self.book.back_pressure(totals, end_ns, corrected)
        if self.config.impact_recorder is not None:
            rows = impact_rows(parts, self.members, self.book.features)
            self.config.impact_recorder(self.job, end_ns, rows)
        if (model := self._learned()) is not None:
            self.book.impact(totals, model, end_ns)
        if self.config.mode == "reflex":
            self.book.history(totals, self._history(parts), end_ns)
        self.book.node_compound(totals, end_ns)
        for entity, amount in totals.items():
            if amount > 0:
                self.last_evidence[entity] = window
        self.fresh = {e for e, w in self.last_evidence.items() if window - w <= RECENT_WINDOWS}
        self.last_evidence = {e: self.last_evidence[e] for e in self.fresh}
        if self.last_event_entities & self.fresh:
            quiet = end_ns - self.incident_active_ns
            if quiet > 1.5 * self.config.window_seconds * 1e9:  # a new run of evidence
                self.incident_gap_ns = quiet
            self.incident_active_ns = end_ns
        if self.config.recorder is not None:
            self.config.recorder(self.job, end_ns, self.book.features)
        keys = np.array(sorted(totals), dtype=object)
        self.compound.update(keys, np.array([totals[k] for k in keys.tolist()]))
        keys = np.array(sorted(corrected), dtype=object)
        self.corrected.update(keys, np.array([corrected[k] for k in keys.tolist()]))
        out: list[tuple[str, object]] = [("points", self._score_points(end_ns))]
        self.recent_events = [
            e for e in self.recent_events + events if e.time_ns >= end_ns - 300 * 10**9
        ]
        out.extend(("event", event) for event in self._triggered(window, end_ns, parts, events))
        if parts:
            # A job name may come back (a requeued job keeps its id): only its last window's
            # parts say whether it has ended.
            self.finished = not any(p.active for p in parts)
            if self.finished:
                self.liveness.forget_job(self.job)
        return out

    def retired(self) -> JobState:
        """What is kept of the job once it ended with nothing pending: its name and its last
        window, so that a shard's part arriving after the end is reported late rather than
        taken for a new job. Its peers, baselines and evidence (about 2 KB a rank) go: the flow
        outlives thousands of jobs, and every snapshot would carry them. A job that comes back
        under the same name starts afresh, as it runs on other nodes, from its first step."""
        return JobState(
            self.job, self.config, n_shards=self.n_shards, last_done=self.last_done, finished=True
        )

    def _history(self, parts: list[JobWindow]) -> dict[str, tuple[float, str]]:
        """The records of the job's parts, taken once, at the job's first window: a record
        this job's own fault feeds must not weigh that fault's evidence again."""
        if self.history is None:
            self.history = {e: r for p in parts for e, r in p.records.items()}
            known = {e for e, (trouble, _) in self.history.items() if trouble >= RECORD_MATTERS}
            self.step_peers.quick = {
                rank for rank, info in self.members.items() if rank_entity(info) in known
            }
        return self.history

    def _weights(self, profile: str) -> dict[str, float]:
        return self.config.weights.get(profile) or self.config.weights.get(_DEFAULT_PROFILE, {})

    def _score_points(self, end_ns: int) -> list[Point]:
        points = []
        for entity, score in sorted(self.compound.scores.items()):
            if score < self.config.score_export_min:
                continue
            node, component, index = entity.split("|")
            notes = self.book.notes(entity)
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
    ) -> list[LocalizationEvent]:
        """This window's events: findings of the per-step view and of telemetry gaps (which
        never hold back a hardware event), then at most one incident event."""
        found = self._step_findings(parts)
        out: list[LocalizationEvent] = []
        for finding in found:
            if finding.kind in ("straggler", *DRIFTS) or self.config.mode != "reflex":
                continue
            sick = self._stage_sick(finding)
            if sick is None:
                out.append(self._finding(window, end_ns, finding.kind, finding))
            else:
                out += self._stage_fault(window, end_ns, finding, sick)
        out += [self._gap_finding(window, end_ns, e) for e in events if e.kind == "telemetry_gap"]
        incident = self._incident(window, end_ns, parts, events, found)
        if incident is None:
            return out
        coexisting = self._coexisting(window, end_ns, incident)
        return [*out, incident, *coexisting]

    def _coexisting(
        self, window: int, end_ns: int, explicit: LocalizationEvent
    ) -> list[LocalizationEvent]:
        """An explicit error ends the job; a part on another node that was already slowing it
        before the error would go down with the incident, and come back in the restarted job.
        It gets an event of its own when its slowing evidence began before the error, held,
        is its own (history or its own slow steps) and scores twice what naming needs."""
        root = explicit.top
        if explicit.trigger != "explicit" or root is None or root.role != "root":
            return []
        error_ns = min((e.since_ns for e in root.evidence), default=end_ns)
        suspects = self._suspects(None)
        for other in self._slowing_lead(suspects):
            if other.node == root.node or other.entity not in self.fresh:
                continue
            told = self.episodes.get(other.node, [])
            if told and end_ns - told[-1] < self.config.cooldown_s * 1e9:
                continue  # an event of this job already named it
            began = min((e.since_ns for e in other.evidence), default=end_ns)
            if (
                began >= error_ns
                or not self._held(other.entity, error_ns)
                or not _own_evidence(other)
                or self._slowing(other.entity) < 2 * self.config.min_suspect_score
            ):
                continue
            rest = [s for s in suspects if s.entity != other.entity]
            event = describe(
                self.job, self.config.cluster, window, end_ns, "regression", None,
                [other, *rest], [], "",
            )  # fmt: skip
            summary = f"a second fault, slowing the job before {root.node}'s error: {event.summary}"
            self._opened(end_ns, True, {(other.node, other.entity)})
            return [replace(event, summary=summary, sites=self._sites_of(event.suspects))]
        return []

    def _stage_sick(self, finding: StepFinding) -> tuple[str, tuple[str, float, float]] | None:
        """A stage slower on all its ranks is partitioning, unless its ranks sit on few nodes
        and most of its GPUs deviate from their peers in a slowing signal (a node in power
        brake handed the last stage): then the entity to blame, else None."""
        if finding.kind != "stage":
            return None
        nodes = {i.node for i in self.members.values() if i.pp_rank == finding.stage}
        everyone = {i.node for i in self.members.values()}
        if len(nodes) * 2 > len(everyone):
            return None
        # What slows every rank of a stage must touch most of its GPUs: one hot GPU or a noisy
        # port among them cannot (and a quirky fleet has plenty of those).
        gpus = {
            f"{i.node}|gpu|{i.gpu}" for i in self.members.values() if i.pp_rank == finding.stage
        }
        slowing = {
            e: v
            for e, v in self.book.peer_only().items()
            if e in gpus and v[0].startswith(_SLOWING_SIGNALS)
        }
        if len(slowing) * 2 < len(gpus):
            return None
        worst = max(slowing, key=lambda e: (slowing[e][2], e))
        return worst, slowing[worst]

    def _stage_fault(
        self,
        window: int,
        end_ns: int,
        finding: StepFinding,
        sick: tuple[str, tuple[str, float, float]],
    ) -> list[LocalizationEvent]:
        entity, (signal, peer_z, strength) = sick
        node, component, index = entity.split("|")
        evidence = Evidence(signal, None, round(peer_z, 2), strength, end_ns)
        lead = Suspect(node, component, index, round(self.compound.get(entity), 3), [evidence])
        event = self._lead_event(window, end_ns, "stage_hardware", finding, lead)
        return [event] if event is not None else []

    def _step_findings(self, parts: list[JobWindow]) -> list[StepFinding]:
        for part in parts:
            rows = part.steps
            for step in np.unique(rows.step).tolist():
                mine = rows.step == step
                compute = dict(
                    zip(rows.rank[mine].tolist(), rows.compute[mine].tolist(), strict=True)
                )
                self.step_peers.add_step(int(step), compute, int(rows.time_ns[mine].max()))
        return self.step_peers.judge(self.members)

    def _incident(
        self,
        window: int,
        end_ns: int,
        parts: list[JobWindow],
        events: list[ExplicitEvent],
        found: list[StepFinding],
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
        # A marked checkpoint is the job's own pause: the step without it is what regressed.
        step_times = np.concatenate(
            [p.steps.step_time - np.nan_to_num(p.steps.checkpoint) for p in parts]
        )
        steps = np.concatenate([p.steps.step for p in parts])
        rising = self.regression.cusum > 0
        regressed = bool(len(step_times)) and self.regression.update(
            float(np.nanmedian(step_times))
        )
        if not rising and self.regression.cusum > 0 and self.held_since < 0:
            self.slowdown_onset_ns = end_ns  # the slowdown a regression may report began
        alive = any(p.alive_nodes for p in parts)
        max_step = int(steps.max()) if len(steps) else self.hang.last_step
        typical = float(np.nanmedian(step_times)) if np.isfinite(step_times).any() else 0.0
        if typical > 0:
            self.step_now = typical
        known = [p.paused_s for p in parts if p.paused_s is not None]
        paused = min(known) if known else 0.0  # every shard's GPUs idle and writing
        hung = self.hang.update(max_step, alive, end_ns, typical, paused)
        self._learn_stages(parts, regressed)
        if hardware:
            return self._emit(window, end_ns, "explicit", hardware[0])
        corrupted = self._loss_divergence(window, end_ns, parts)
        if corrupted is not None:
            return corrupted
        stragglers = [f for f in found if f.kind == "straggler"]
        if stragglers and self.config.mode != "temporal_only":
            return self._emit_straggler(window, end_ns, stragglers)
        explained = self._explained_straggler(window, end_ns)
        if explained is not None:
            return explained
        returning = self._returning_part(window, end_ns)
        if returning is not None:
            return returning
        drifted = self._drifted(window, end_ns, [f for f in found if f.kind in DRIFTS])
        if drifted is not None:
            return drifted
        comm = self._comm_straggler(window, end_ns, parts)
        if comm is not None:
            return comm
        if cascade and self.cascade_waiting < 0:
            self.cascade_waiting = window
            return None
        if self.cascade_waiting >= 0 and window > self.cascade_waiting:
            self.cascade_waiting = -1
            return self._emit(window, end_ns, "explicit", self._exit_root())
        if hung:
            return self._emit(window, end_ns, "hang", None)
        if regressed and self.held_since < 0:
            self.regression.reset()
            self.held_since = window
        if self.held_since >= 0:
            return self._held_regression(window, end_ns)
        return self._revision(window, end_ns)

    def _slight(self) -> bool:
        """The job's step time is less than INFO_MIN_SLOWDOWN above its learned level."""
        level = self.regression.level()
        return level > 0 and self.step_now < level * (1 + INFO_MIN_SLOWDOWN)

    def _strong_suspect(self, end_ns: int) -> Suspect | None:
        """The strongest suspect with fresh evidence that held and a score worth naming: the
        one the regression's event would lead with. A stronger part whose evidence comes and
        goes (a GPU throttling 10 s in 120) does not hide a held one below it."""
        fresh = [s for s in self._suspects(None) if s.entity in self.fresh]
        suspects = self._held_lead(fresh, end_ns)
        return suspects[0] if suspects else None

    def _held_lead(self, suspects: list[Suspect], end_ns: int) -> list[Suspect]:
        """The suspects whose evidence held, from the first whose slowing score is worth
        naming: whom a regression's event leads with."""
        return self._slowing_lead([s for s in suspects if self._held(s.entity, end_ns)])

    def _slowing_lead(self, suspects: list[Suspect]) -> list[Suspect]:
        """The suspects from the first whose slowing score is worth naming (see _slowing)."""
        lead = 0
        while lead < len(suspects) and (
            self._slowing(suspects[lead].entity) < self.config.min_suspect_score
        ):
            lead += 1
        return suspects[lead:]

    def _slowing(self, entity: str) -> float:
        """The part's score without what corrected errors and suffered congestion gave it. A
        regression is a slowdown: the part it names must show slowness (a signal off its
        history or peers, slow steps, the back-pressure of others waiting on it), and a
        corrected MCE or remap, or a port's own credit waits with no faulty receiver to give
        them to, is no sign of that. Such evidence still ranks the parts that do show it. (A
        benign soak named a host for a regression because two corrected MCEs arrived in the
        window it fired.)"""
        return self.compound.get(entity) - self.corrected.get(entity)

    def _held(self, entity: str, end_ns: int) -> bool:
        """Some evidence of the part has held for PERSIST_WINDOWS. A slowdown builds over
        several windows before it triggers; a part that went wrong only in the last one or two
        (a GPU's throttle of a few seconds, which a large fleet has every minute) did not
        cause it. Its own slow steps count once they span two steps: with steps longer than a
        window, one slow step stays the latest for several windows."""
        window_ns = PERSIST_WINDOWS * self.config.window_seconds * 1e9
        steps_ns = max(window_ns, 2 * self.step_now * 1e9)

        def held(signal: str, since: int, last_ns: float) -> bool:
            return since <= last_ns - (steps_ns if signal == STEP_SIGNAL else window_ns)

        if any(held(s, since, end_ns) for (e, s), since in self.book.since.items() if e == entity):
            return True
        # Or it held that long and ended while the job slowed: a regression is told some
        # windows after its slowdown began, sometimes after the burst that caused it is over.
        last_window_ns = self.config.window_seconds * 1e9
        return any(
            gone - last_window_ns >= self.slowdown_onset_ns
            and held(s, since, gone - last_window_ns)
            for (e, s), (since, gone) in self.book.ended.items()
            if e == entity
        )

    def _held_regression(self, window: int, end_ns: int) -> LocalizationEvent | None:
        """A regression is told once a suspect stands out. With none, the job must stay slow:
        after HOLD_WINDOWS a job back within INFO_MIN_SLOWDOWN of its level ends the hold
        quietly, as at any window after; one still slow at INFO_HOLD_WINDOWS is told. A part
        that stands out after the first HOLD_WINDOWS is held to what a revision needs."""
        held = window - self.held_since
        top = self._strong_suspect(end_ns)
        if top is not None and held > HOLD_WINDOWS and not _own_evidence(top):
            top = None
        if top is None:
            if held < HOLD_WINDOWS:
                return None
            if self._slight():
                self.held_since = -1  # the job came back by itself: nothing to tell
                return None
            if held < INFO_HOLD_WINDOWS:
                return None
        self.held_since = -1
        return self._emit(window, end_ns, "regression", None)

    def _revision(self, window: int, end_ns: int) -> LocalizationEvent | None:
        """After a "no hardware fault", a suspect whose evidence arrives later is told in a
        follow-up event that names it (within REVISE_WINDOWS of the first verdict)."""
        revise_ns = REVISE_WINDOWS * self.config.window_seconds * 1e9
        if end_ns - self.info_verdict_ns >= min(self.config.cooldown_s * 1e9, revise_ns):
            return None
        top = self._strong_suspect(end_ns)
        if top is None or top.node in self.last_event_nodes:
            return None
        if not _own_evidence(top):
            return None
        self.info_verdict_ns = -(10**19)
        return self._emit(window, end_ns, "regression", None, revises=True)

    def _comm_straggler(
        self, window: int, end_ns: int, parts: list[JobWindow]
    ) -> LocalizationEvent | None:
        """A part that slows the job's communication, not its compute: every rank then waits
        in its collectives alike, so no rank's own times stand out, and the part's own fault
        signals are the evidence (a port trained down, retraining, erroring; a GPU's PCIe or
        NVLink down). Told when such evidence has held for 3 windows, stands above twice the
        naming threshold, and the job spends a real share of its steps communicating."""
        held = end_ns - HOLD_WINDOWS * self.config.window_seconds * 1e9
        candidates = []
        for entity in self.fresh:
            signals = [
                e for e in self.book.notes(entity)
                if e.signal in COMM_FAULTS and e.since_ns <= held and e.weight > 0
            ]  # fmt: skip
            score = self.compound.get(entity)
            if signals and score >= 2 * self.config.min_suspect_score:
                candidates.append((score, entity))
        if not candidates:  # the common case: no step data is touched
            return None
        comm = np.concatenate([p.steps.comm for p in parts])
        step = np.concatenate([p.steps.step_time for p in parts])
        ok = np.isfinite(comm) & np.isfinite(step) & (step > 0)
        share = float(np.median(comm[ok] / step[ok])) if ok.any() else 0.0
        if share < COMM_SHARE:
            return None
        ports = [self._suspect(e) for _, e in sorted(candidates, reverse=True)]
        lead, entity, component = ports[0], ports[0].entity, ports[0].component
        switch = shared_switch(ports, self.sites, 2 * self.config.min_suspect_score)
        if switch is not None:  # several nodes' ports under one switch: the switch
            lead = switch_suspect(switch, ports, self.sites)
        rails = {gpu: nic for p in parts for gpu, nic in p.rails.items()}
        # The ranks whose traffic the part carries: a GPU's own rank, or those on a port's rail.
        carried = (
            {entity} if component == "gpu" else {g for g, nic in rails.items() if nic == entity}
        )
        ranks = sorted(i.rank for i in self.members.values() if rank_entity(i) in carried)
        finding = StepFinding("comm_straggler", ratio=1 + share, since_ns=int(held))
        if component == "gpu":
            label = f"the traffic of rank {', '.join(map(str, ranks)) or '?'}"
        elif ranks:
            label = f"the rail of ranks {', '.join(map(str, ranks))}"
        else:
            label = "a rail whose GPUs are unknown (no gpu_topology)"
        return self._lead_event(window, end_ns, "comm_straggler", finding, lead, rank_label=label)

    def _loss_divergence(
        self, window: int, end_ns: int, parts: list[JobWindow]
    ) -> LocalizationEvent | None:
        """One replica's loss jumped alone (:mod:`flows.loss_divergence`): its GPUs are
        suspected of silent data corruption. Nothing tells which of the replica's GPUs
        computed wrong, so they are listed together, by compound score, then by rank."""
        if self.config.mode == "temporal_only":
            return None
        found = diverging_ranks(
            np.concatenate([p.steps.rank for p in parts]),
            np.concatenate([p.steps.step for p in parts]),
            np.concatenate([p.steps.loss for p in parts]),
            self.world_size,
        )
        if found is None:
            return None
        step, ranks = found
        first_rank: dict[str, int] = {}
        for rank in ranks:
            if rank in self.members:
                first_rank.setdefault(rank_entity(self.members[rank]), rank)
        if not first_rank:
            return None
        order = sorted(first_rank, key=lambda e: (-self.compound.get(e), first_rank[e]))
        # The replica's pipeline stages sit on different nodes: each node's first GPU comes
        # before any node's second, so the first few suspects cover every node it touches.
        nodes = list(dict.fromkeys(entity.split("|")[0] for entity in order))
        by_node = {n: [e for e in order if e.startswith(f"{n}|")] for n in nodes}
        depth = max(len(entities) for entities in by_node.values())
        order = [e for i in range(depth) for n in nodes for e in by_node[n][i : i + 1]]
        replica = [self._suspect(entity) for entity in order]
        since = int(min(p.steps.time_ns.min(initial=end_ns) for p in parts))
        evidence = Evidence(LOSS_SIGNAL, None, None, 1.0, since)
        replica = [replace(s, evidence=[evidence, *s.evidence][:6]) for s in replica]
        finding = StepFinding("loss_divergence", rank=ranks[0], since_ns=since, at_step=step)
        return self._lead_event(
            window, end_ns, "loss_divergence", finding, replica[0],
            rank_label=spans(ranks), suspects=replica,
        )  # fmt: skip

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
        stage_of = {rank: info.pp_rank for rank, info in self.members.items()}
        # Each row's stage by a dict lookup at C speed; rows of no known rank are left out.
        stages = np.array(list(map(stage_of.get, ranks.tolist(), repeat(_NO_STAGE))), np.int64)
        keep = (stages != _NO_STAGE) & np.isfinite(compute)
        stages, compute = stages[keep], compute[keep]
        return {
            stage: float(np.median(compute[stages == stage]))
            for stage in dict.fromkeys(stages.tolist())  # in the order first seen
        }

    def _emit(
        self,
        window: int,
        end_ns: int,
        trigger: str,
        root: ExplicitEvent | None,
        revises: bool = False,
    ) -> LocalizationEvent | None:
        suspects = self._suspects(root)
        top = suspects[0] if suspects else None
        in_cooldown = end_ns - self.last_event_ns < self.config.cooldown_s * 1e9
        # One incident, one event: within the cooldown only an explicit error on a new node
        # opens a new incident; slowdowns, hangs and cascades belong to the open one.
        if in_cooldown and not self._new_incident(root, top):
            return None
        if not in_cooldown and trigger == "regression" and self._still_told(top):
            return None
        if trigger == "regression" and root is None:
            suspects = self._held_lead(suspects, end_ns)
            top = suspects[0] if suspects else None
        if top is not None and root is None and top.score < self.config.min_suspect_score:
            suspects, top = [], None
        if top is None and root is None and trigger == "regression" and self._pattern_told(end_ns):
            return None  # the step pattern already said why, and that no hardware is at fault
        if top is None and root is None and trigger == "regression" and self._slight():
            return None  # a few percent with no part to blame: nothing an SRE can act on
        pattern = stage_pattern(self.stage_now, self.stage_compute)
        event = describe(
            self.job,
            self.config.cluster,
            window,
            end_ns,
            trigger,
            root,
            suspects,
            self.recent_events,
            pattern,
        )
        if revises:
            event = replace(
                event, summary=f"revises the earlier 'no hardware fault': {event.summary}"
            )
        if trigger == "hang" and top is None and root is None and self.hang.told:
            event = replace(event, summary=f"{event.summary}: {self.hang.told}")
        switch = (
            None
            if root is not None
            else shared_switch(suspects, self.sites, self.config.min_suspect_score)
        )
        if switch is not None:
            lead = switch_suspect(switch, suspects, self.sites)
            event = replace(
                event,
                suspects=[lead, *suspects],
                action=f"check switch {switch} (ports, buffers, firmware) before draining nodes",
                summary=f"several nodes under switch {switch} degrade together: {event.summary}",
            )
        event = replace(event, sites=self._sites_of(event.suspects))
        if top is None and root is None:
            self.info_verdict_ns = end_ns
        event = self._recurrence(event, root is None)
        self._opened(end_ns, in_cooldown, {(s.node, s.entity) for s in suspects[:1]})
        return event

    def _opened(self, end_ns: int, in_cooldown: bool, named: set[tuple[str, str]]) -> None:
        """An event was told: the nodes it named join those of the incidents still open."""
        if not in_cooldown:
            self.last_event_nodes, self.last_event_entities = set(), set()
        self.last_event_ns = end_ns
        self.incident_active_ns, self.incident_gap_ns = end_ns, 0
        for node, _ in named:
            self.episodes.setdefault(node, []).append(end_ns)
        self.last_event_nodes |= {node for node, _ in named}
        self.last_event_entities |= {entity for _, entity in named}
        self.regression.reset()

    def _exit_root(self) -> ExplicitEvent | None:
        """The first rank to exit, when its message points at its GPU and nothing else
        explains the crash (no hardware error before it: see :mod:`flows.exit_messages`)."""
        exits = [e for e in self.recent_events if e.kind == "process_exit"]
        first = min(exits, key=lambda e: e.time_ns, default=None)
        if first is None or first.rank not in self.members:
            return None
        hint = hardware_hint(first.meaning)
        if hint is None:
            return None
        gpu = self.members[first.rank].gpu
        return replace(
            first,
            component="gpu",
            index=str(gpu),
            severity="warning",
            meaning=f"rank {first.rank} exited with '{hint}', a device error",
            action="drain node; reset the GPU; read the node's kernel log for XIDs",
        )

    def _emit_straggler(
        self, window: int, end_ns: int, found: list[StepFinding]
    ) -> LocalizationEvent | None:
        """A rank slower than its role peers step after step: its GPU (or, when most ranks of
        its node straggle together, the node's NIC or host) leads the event."""
        by_rank = {f.rank: f for f in found}
        slow = [(self.members[f.rank], f.ratio, f.z) for f in found]
        placed = place_stragglers(slow, list(self.members.values()), dict(self.compound.scores))
        entity, _, _, _ = max(placed, key=lambda p: p[1])
        lead_rank = max(
            (f for f in found if entity.startswith(f"{self.members[f.rank].node}|")),
            key=lambda f: f.ratio,
        )
        node, component, index = entity.split("|")
        evidence = Evidence(
            STEP_SIGNAL, None, round(lead_rank.z, 2), lead_rank.ratio, lead_rank.since_ns
        )
        lead = Suspect(
            node,
            component,
            index,
            round(self.compound.get(entity), 3),
            # The cause first (low clocks, a throttle) where the agent saw one; the symptom,
            # the slow steps, after it (alone on a hook-only cluster).
            [*[e for e in self.book.notes(entity) if e.signal != STEP_SIGNAL][:5], evidence],
        )
        label = _rank_label(self.members[lead_rank.rank])
        return self._lead_event(
            window, end_ns, "straggler", by_rank[lead_rank.rank], lead, rank_label=label
        )

    def _learned(self) -> ImpactModel | None:
        """The impact model, where this mode weighs evidence with it."""
        impact = self.config.impact if self.config.mode == "reflex" else None
        return impact.current() if isinstance(impact, ImpactModelFile) else impact

    def _explained_straggler(self, window: int, end_ns: int) -> LocalizationEvent | None:
        """A rank a little slower than its peers for many steps, which a part it runs on
        explains (flows/judge/explained_straggler.py): that part leads a straggler event."""
        if self.config.mode == "temporal_only":
            return None
        window_ns = self.config.window_seconds * 1e9
        model = self._learned()
        enough = None if model is None else learned_enough(model, self.book.features)
        found = explaining_part(
            self.step_peers.marginal(),
            self.members,
            self.book.peer_since,
            end_ns,
            window_ns,
            enough,
        )
        if found is None:
            return None
        node, component, index = found.entity.split("|")
        finding = found.finding
        told = self.episodes.get(node, [])
        if told and told[-1] >= found.since_ns:  # told since, its state unchanged: not news
            self.step_peers.marginal_told.add(finding.rank)
            return None
        evidence = [
            Evidence(found.signal, None, round(found.peer_z, 2), 1.0, found.since_ns),
            Evidence(STEP_SIGNAL, None, None, finding.ratio, finding.since_ns),
        ]
        score = round(self.compound.get(found.entity), 3)
        lead = Suspect(node, component, index, score, evidence)
        label = _rank_label(self.members[finding.rank])
        event = self._lead_event(window, end_ns, "straggler", finding, lead, rank_label=label)
        if event is None:
            return None
        # Its node's other slow ranks are this incident, told with it.
        self.step_peers.marginal_told.update(r for r, i in self.members.items() if i.node == node)
        why = (
            f"; {found.signal} on its {component} stands {found.peer_z:.0f} spreads off its "
            f"peers' since {_clock(found.since_ns)} UTC (a part slow from the job's start has "
            "no history to differ from)"
        )
        if model is not None and found.signal not in SLOWING_STATES:
            predicted = predicted_slowdown(model, self.book.features, found.entity)
            why += (
                f"; the fleet's learned impact model (version {model.version}) puts what it "
                f"shows at {100 * predicted:.1f}% slower"
            )
        return replace(event, summary=event.summary + why)

    def _returning_part(self, window: int, end_ns: int) -> LocalizationEvent | None:
        """A rank on a GPU that came to the job with a record, a little slower than its peers
        over its latest few steps while its GPU's state is off its own history
        (flows/incidents/returning_part.py): that GPU leads a straggler event that names its
        record."""
        if not self.step_peers.quick:  # the common case: no part came with a record
            return None
        found = returning_part(
            self.step_peers.marginal_known(),
            self.members,
            lambda entity: self.book.notes(entity) if entity in self.fresh else None,
            end_ns,
            self.config.window_seconds * 1e9,
        )
        if found is None:
            return None
        node, component, index = found.entity.split("|")
        finding, note = found.finding, found.note
        evidence = [note, Evidence(STEP_SIGNAL, None, None, finding.ratio, finding.since_ns)]
        lead = Suspect(node, component, index, round(self.compound.get(found.entity), 3), evidence)
        label = _rank_label(self.members[finding.rank])
        event = self._lead_event(window, end_ns, "straggler", finding, lead, rank_label=label)
        if event is None:
            return None
        self.step_peers.marginal_told.add(finding.rank)
        _, why = (self.history or {}).get(found.entity, (0.0, ""))
        told = (
            f"; it came to this job with a record from earlier jobs ({why}), and its "
            f"{note.signal} stands {abs(note.temporal_z or 0.0):.0f} spreads off its own "
            f"history since {_clock(note.since_ns)} UTC: the part that failed before, failing "
            "again"
        )
        return replace(event, summary=event.summary + told)

    def _observe_clocks(self, entities: np.ndarray, values: np.ndarray) -> None:
        """Each rank's GPU clock this window, for the rank's own-history view (drifts)."""
        if self.config.mode == "peer_only" or not len(entities) or not self.members:
            return
        row_of = {entity: row for row, entity in enumerate(entities.tolist())}
        clocks, throttled, reasoned = {}, set(), set()
        for rank, info in self.members.items():
            row = row_of.get(rank_entity(info))
            if row is None:
                continue
            clocks[rank] = float(values[row, _CLOCK_COLUMN])
            if np.nan_to_num(values[row, _THROTTLE_COLUMNS]).any():
                throttled.add(rank)
            if rank in throttled or np.nan_to_num(values[row, _POWER_CAP_COLUMN]) > 0:
                reasoned.add(rank)
        self.step_peers.drift.observe_clocks(clocks, throttled, reasoned)

    def _past_clocks(self, parts: list[JobWindow]) -> None:
        """Each rank's GPU clock in the last job it served (flows/judge/busy_clocks.py), taken once,
        at the job's first window, as the records are."""
        if self.past_clocks_taken or self.config.mode == "peer_only":
            return
        self.past_clocks_taken = True
        past = {e: kept for p in parts for e, kept in p.past_clocks.items()}
        drift = self.step_peers.drift
        drift.past = {
            rank: past[entity]
            for rank, info in self.members.items()
            if (entity := rank_entity(info)) in past
        }
        drift.node_of = {rank: self.members[rank].node for rank in drift.past}

    def _drifted(
        self, window: int, end_ns: int, drifts: list[StepFinding]
    ) -> LocalizationEvent | None:
        """A rank slower than its own history with its GPU's clock, in this job or against its
        last (flows/judge/rank_drift.py): its GPU leads a drift event, which says so when half its
        node's ranks drifted with it."""
        drifts = [f for f in drifts if f.rank in self.members]
        if not drifts or self.config.mode == "peer_only":
            return None
        finding = max(drifts, key=lambda f: (f.ratio, -f.rank))
        info = self.members[finding.rank]
        node, entity = info.node, rank_entity(info)
        on_node = [r for r, i in self.members.items() if i.node == node]
        shifted = [r for r in on_node if self.step_peers.drift.shifted(r)]
        evidence = [
            Evidence("sm_clock_low", None, None, round(finding.z, 4), finding.since_ns),
            Evidence(STEP_SIGNAL, None, None, finding.ratio, finding.since_ns),
        ]
        lead = Suspect(node, "gpu", str(info.gpu), round(self.compound.get(entity), 3), evidence)
        label = _rank_label(info)
        past_job = self.step_peers.drift.past.get(finding.rank, (0.0, ""))[1]
        event = self._lead_event(
            window, end_ns, "drift", finding, lead, rank_label=label, detail=past_job
        )
        if event is None or 2 * len(shifted) < len(on_node) or len(on_node) < 2:
            return event
        whole = (
            f"; {len(shifted)} of the node's {len(on_node)} ranks drifted with it: the node "
            "(its cooling or power), not one GPU"
        )
        return replace(event, summary=event.summary + whole)

    def _lead_event(
        self,
        window: int,
        end_ns: int,
        kind: str,
        finding: StepFinding,
        lead: Suspect,
        rank_label: str = "",
        suspects: list[Suspect] | None = None,
        detail: str = "",
    ) -> LocalizationEvent | None:
        """An event whose suspect the per-step view found (a straggler, a sick stage): within
        the cooldown, a new incident only on another node once the open one has gone quiet.
        ``suspects`` (lead first) replaces the compound ranking after the lead."""
        in_cooldown = end_ns - self.last_event_ns < self.config.cooldown_s * 1e9
        if in_cooldown and not self._new_incident(None, lead, found_by_steps=True):
            return None
        if not in_cooldown and self._still_told(lead):
            return None
        named = suspects or [lead]
        others = [s for s in self._suspects(None) if s.entity not in {n.entity for n in named}]
        event = describe_finding(
            self.job, self.config.cluster, window, end_ns, kind, finding, [*named, *others],
            rank_label=rank_label, detail=detail,
        )  # fmt: skip
        event = self._recurrence(event, True)
        self._opened(end_ns, in_cooldown, {(lead.node, lead.entity)})
        return replace(event, sites=self._sites_of(event.suspects))

    def _suspect(self, entity: str) -> Suspect:
        node, component, index = entity.split("|")
        score = round(self.compound.get(entity), 3)
        return Suspect(node, component, index, score, self.book.notes(entity)[:6])

    def _sites_of(self, suspects: list[Suspect]) -> dict[str, dict[str, str]]:
        return {s.node: self.sites[s.node] for s in suspects if s.node in self.sites}

    def _finding(
        self, window: int, end_ns: int, kind: str, finding: StepFinding
    ) -> LocalizationEvent:
        """The job's step pattern (a slow stage, steps following the data): a finding below
        paging that touches no incident state, so it never holds back a hardware event."""
        self.last_finding_ns = end_ns
        return describe_finding(self.job, self.config.cluster, window, end_ns, kind, finding, [])

    def _pattern_told(self, end_ns: int) -> bool:
        return end_ns - self.last_finding_ns < self.config.cooldown_s * 1e9

    def _gap_finding(self, window: int, end_ns: int, gap: ExplicitEvent) -> LocalizationEvent:
        finding = StepFinding("telemetry_gap", since_ns=gap.time_ns)
        return describe_finding(
            self.job, self.config.cluster, window, end_ns, "telemetry_gap", finding, [],
            detail=gap.meaning,
        )  # fmt: skip

    def _new_incident(
        self, root: ExplicitEvent | None, top: Suspect | None, found_by_steps: bool = False
    ) -> bool:
        """Within the cooldown, only a node no open incident named opens a new one: through an
        explicit error, a straggler found step by step (its own steps are its own evidence),
        or a score that stands on its own. After a verdict that named no hardware, any suspect
        worth naming does; while another incident has fresh evidence, only one far above the
        threshold (not the spill-over of the first fault) does. A part already named that
        recovered (see RECUR_QUIET_S) and slows the job again is a new episode."""
        if root is not None:
            return root.node not in self.last_event_nodes
        if top is None:
            return False
        if top.node in self.last_event_nodes:
            return self._recurs()
        if found_by_steps:
            return True
        if not self.last_event_nodes:
            return top.score >= self.config.min_suspect_score
        previous_active = bool(self.last_event_entities & self.fresh)
        bar = 4 if previous_active else 2
        return top.score >= bar * self.config.min_suspect_score

    def _still_told(self, top: Suspect | None) -> bool:
        """The part the last incident named leads again past the cooldown without having
        recovered (fresh evidence throughout, see RECUR_QUIET_S): the same fault, already told.
        Paging it again every cooldown is noise; repeating a page is the alert rule's call."""
        if top is None or top.entity not in self.last_event_entities:
            return False
        return top.entity in self.fresh and not self._recurs()

    def _recurs(self) -> bool:
        """A node an open incident named slows the job again after it recovered: the parts
        the incident named had no fresh evidence for RECUR_QUIET_S before this episode."""
        return self.incident_gap_ns >= RECUR_QUIET_S * 1e9

    def _recurrence(self, event: LocalizationEvent, implicit: bool) -> LocalizationEvent:
        """An implicit fault's event naming a node an earlier event of this job named says so,
        and how often: a fault that comes and goes is an intermittent part, the kind that fails
        job after job."""
        top = event.top
        if not implicit or top is None or top.node not in self.episodes:
            return event
        before = self.episodes[top.node]
        when = ", ".join(f"{_clock(t)} UTC" for t in before)
        action = (
            f"{event.action}; it came back after recovering (an intermittent part): drain the "
            "node for diagnostics"
        )
        return replace(
            event,
            summary=f"recurs (episode {len(before) + 1} in this job, told before at {when}): "
            f"{event.summary}",
            action=action,
        )

    def _suspects(self, root: ExplicitEvent | None) -> list[Suspect]:
        # Entities with recent evidence come first: a decaying score from an earlier
        # incident must not outrank what is going wrong now.
        ranked = sorted(
            self.compound.scores.items(), key=lambda kv: (kv[0] not in self.fresh, -kv[1], kv[0])
        )
        suspects = []
        for entity, score in ranked[:5]:
            node, component, index = entity.split("|")
            suspects.append(
                Suspect(node, component, index, round(score, 3), self.book.notes(entity)[:6])
            )
        if root is not None:
            suspects = [s for s in suspects if s.entity != root.entity]
            notes = self.book.notes(root.entity)
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


def _clock(time_ns: int) -> str:
    return datetime.fromtimestamp(time_ns / 1e9, tz=UTC).strftime("%H:%M:%S")


def _own_evidence(top: Suspect) -> bool:
    """A part told only by its peers (no history of its own yet) may be a quirk of that part:
    a late suspect (a revision, a hold's later windows) needs evidence from its own history,
    or its own slow steps."""
    return any(e.temporal_z is not None or e.signal == STEP_SIGNAL for e in top.evidence)


def _checkpointing(parts: list[JobWindow]) -> bool:
    """Any rank marked a checkpoint in this window (the hook's checkpoint section)."""
    return any(bool(np.nan_to_num(p.steps.checkpoint).max(initial=0.0) > 0) for p in parts)


def _rank_label(info: RankInfo) -> str:
    where = rank_entity(info).replace("|", " ")
    return f"{where}, GPU by rank order: the hook did not say" if info.gpu_inferred else where
