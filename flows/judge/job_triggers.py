"""Which symptom of a job's window triggers, in order: errors, findings, hangs, regressions."""

from __future__ import annotations

from dataclasses import replace
from itertools import repeat

import numpy as np

from reflex_localize.flows.incidents.events import Evidence, LocalizationEvent, Suspect
from reflex_localize.flows.incidents.explain import describe
from reflex_localize.flows.judge.degraded_links import KINDS as LINK_KINDS
from reflex_localize.flows.judge.job_fields import (
    CASCADE_AFTER_CRITICAL_S,
    DRIFTS,
    HOLD_WINDOWS,
    INFO_HOLD_WINDOWS,
    NO_STAGE,
    REVISE_WINDOWS,
    SLOWING_SIGNALS,
    own_evidence,
)
from reflex_localize.flows.judge.job_findings import PartFindings
from reflex_localize.flows.judge.nic_roles import RAIL
from reflex_localize.flows.judge.step_peers import StepFinding
from reflex_localize.flows.messages import ExplicitEvent, JobWindow

HOST_WAITS = ("host_io_pressure", "host_cpu_pressure")  # a host that stalls its ranks


class JobTriggers(PartFindings):
    """Which symptom of a job's window triggers, in order; state in :class:`JobFields`."""

    def _triggered(
        self, window: int, end_ns: int, parts: list[JobWindow], events: list[ExplicitEvent]
    ) -> list[LocalizationEvent]:
        """This window's events: findings of the per-step view and of telemetry gaps (which
        never hold back a hardware event), then at most one incident event."""
        found = self._step_findings(parts)
        events = [self._off_rail(event) for event in events]
        out: list[LocalizationEvent] = []
        for finding in found:
            if finding.kind in ("straggler", *DRIFTS) or self.config.mode != "reflex":
                continue
            sick = self._stage_sick(finding)
            if sick is not None:
                out += self._stage_fault(window, end_ns, finding, sick)
            elif finding.kind == "stage" and self.step_peers.ran_even():
                self.stage_waiting = (window, finding)  # its node's evidence may be on its way
            else:
                out.append(self._finding(window, end_ns, finding.kind, finding))
        out += self._waiting_stage(window, end_ns)
        out += [self._gap_finding(window, end_ns, e) for e in events if e.kind == "telemetry_gap"]
        incident = self._incident(window, end_ns, parts, events, found)
        if incident is not None:
            out += [incident, *self._coexisting(window, end_ns, incident)]
        return out + self._other_criticals(window, end_ns, events)

    def _off_rail(self, event: ExplicitEvent) -> ExplicitEvent:
        """A port that carries none of the job's collectives (a management or storage port,
        flows/judge/nic_roles.py) going down does not stop the job: its error is a warning,
        evidence a part's score must back, not a critical error of the job."""
        if (
            event.component != "nic"
            or event.severity != "critical"
            or self.book.nic_role.get(event.entity, RAIL) == RAIL
        ):
            return event
        meaning = f"{event.meaning} (a port that is no rail: none of the job's collectives)"
        return replace(event, severity="warning", meaning=meaning)

    def _other_criticals(
        self, window: int, end_ns: int, events: list[ExplicitEvent]
    ) -> list[LocalizationEvent]:
        """Critical errors of this window that the incident event did not tell (a second part
        failing in the same window): each gets its own event; repeats of a part's critical error
        are held back by :meth:`_critical_repeats`. Nothing else holds a critical error back."""
        told = []
        for event in events:
            if event.severity != "critical" or event.is_cascade:
                continue
            emitted = self._emit(window, end_ns, "explicit", event)
            if emitted is not None:
                told.append(emitted)
        return told

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
                or not own_evidence(other)
                or self._slowing(other.entity) < self._bar(other.component, 2)
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
        brake handed the last stage), or its node's host waits (its IO or CPU pressure named
        by its score: a one-node stage whose host stalls on its disk): then the entity to
        blame, else None."""
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
            if e in gpus and v[0].startswith(SLOWING_SIGNALS)
        }
        if len(slowing) * 2 < len(gpus):
            return self._stage_host(nodes)
        worst = max(slowing, key=lambda e: (slowing[e][2], e))
        return worst, slowing[worst]

    def _waiting_stage(self, window: int, end_ns: int) -> list[LocalizationEvent]:
        """A stage that falls behind after the job's stages ran even is told as partitioning
        HOLD_WINDOWS after it was seen, as a slowed job waits for its cause (one uneven from
        the first look is told at once): a host that stalls its stage shows in its score a
        few windows after the stage's steps do. Its node's cause by then makes it a stage
        fault; an event that named a part of its nodes meanwhile was its cause, told."""
        if self.stage_waiting is None:
            return []
        began, finding = self.stage_waiting
        sick = self._stage_sick(finding)
        if sick is not None:
            self.stage_waiting = None
            return self._stage_fault(window, end_ns, finding, sick)
        if window - began < HOLD_WINDOWS:
            return []
        self.stage_waiting = None
        nodes = {i.node for i in self.members.values() if i.pp_rank == finding.stage}
        recent = end_ns - self.last_event_ns < self.config.cooldown_s * 1e9
        if recent and nodes & set(self.last_event_nodes):
            return []
        return [self._finding(window, end_ns, "stage", finding)]

    def _stage_host(self, nodes: set[str]) -> tuple[str, tuple[str, float, float]] | None:
        """The host of a slow stage's node whose pressure signals its score names."""
        for host in sorted(f"{node}|host|-" for node in nodes):
            waits = [e for e in self.book.notes(host) if e.signal in HOST_WAITS and e.weight > 0]
            if waits and self.compound.get(host) >= self._bar("host"):
                z = waits[0].peer_z if waits[0].peer_z is not None else waits[0].temporal_z
                return host, (waits[0].signal, z or 0.0, waits[0].weight)
        return None

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
        found = self.step_peers.judge(self.members)
        found += self._node_drift_findings(parts, max(p.end_ns for p in parts))
        self._calibrate_stragglers()
        return found

    def _calibrate_stragglers(self) -> None:
        """The straggler rule's statistic of this window's steps into the budget, and the bar
        it allows for the next ones (the prior min_excess until this fleet's history is in)."""
        peers = self.step_peers
        samples, peers.budget_samples = peers.budget_samples, []
        if self.config.mode != "reflex":
            return
        if samples:
            self.budget.observe("straggler", np.array(samples))
            seen = self.samples_per_window.get("straggler", float(len(samples)))
            self.samples_per_window["straggler"] = 0.9 * seen + 0.1 * len(samples)
        peers.learned_excess = self.budget.bar(
            "straggler",
            peers.min_excess,
            budget=self.config.alarm_budget,
            samples_per_window=self.samples_per_window.get("straggler", 1.0),
            nodes=self.node_count,
            window_s=self.config.window_seconds,
        )

    def _incident(
        self,
        window: int,
        end_ns: int,
        parts: list[JobWindow],
        events: list[ExplicitEvent],
        found: list[StepFinding],
    ) -> LocalizationEvent | None:
        # Critical errors trigger. A warning (a remap recorded, a corrected MCE, an application
        # fault repeated on one GPU) triggers only when something other than error reports
        # corroborates it (its entity's slowing score: reports do not back themselves, and a
        # third report must not page where two did not); otherwise it is just evidence.
        # Operators absorb application XIDs unless a hardware signal comes with them.
        hardware = [
            e
            for e in events
            if not e.is_cascade
            and (
                e.severity == "critical"
                or (
                    e.severity == "warning"
                    and (
                        self._link_changed(e)
                        or self._slowing(e.entity) >= self._bar(e.component, 2)
                    )
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
            began = min((e.time_ns for e in self.recent_events if e.is_cascade), default=end_ns)
            told = max(self.last_critical_ns, self.crash_told_ns)
            if began - told < CASCADE_AFTER_CRITICAL_S * 1e9:
                return None  # the cascade of a crash or critical error told: its incident
            root = self._exit_root()
            crash = self._emit(window, end_ns, "explicit", root, causes_before_ns=began)
            if crash is not None:
                self.crash_told_ns = end_ns  # what follows is the crash's consequence
            return crash
        if hung and end_ns - self.crash_told_ns >= CASCADE_AFTER_CRITICAL_S * 1e9:
            return self._emit(window, end_ns, "hang", None)  # (a crash's ranks make no progress)
        if regressed and self.held_since < 0:
            self.regression.reset()
            self.held_since = window
        if self.held_since >= 0:
            return self._held_regression(window, end_ns)
        return self._revision(window, end_ns)

    def _link_changed(self, event: ExplicitEvent) -> bool:
        """A GPU link or a rail that ran below what it ran at before, under load
        (flows/judge/degraded_links.py): the change backs the warning, whatever the score."""
        if event.kind not in LINK_KINDS:
            return False
        return event.component == "gpu" or self.book.nic_role.get(event.entity, RAIL) == RAIL

    def _held_regression(self, window: int, end_ns: int) -> LocalizationEvent | None:
        """A regression is told once a suspect stands out. With none, the job must stay slow:
        after HOLD_WINDOWS a job back within INFO_MIN_SLOWDOWN of its level ends the hold
        quietly, as at any window after; one still slow at INFO_HOLD_WINDOWS is told. A part
        that stands out after the first HOLD_WINDOWS is held to what a revision needs."""
        held = window - self.held_since
        top = self._strong_suspect(end_ns)
        if top is not None and held > HOLD_WINDOWS and not own_evidence(top):
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
        if not own_evidence(top):
            return None
        self.info_verdict_ns = -(10**19)
        return self._emit(window, end_ns, "regression", None, revises=True)

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
        stages = np.array(list(map(stage_of.get, ranks.tolist(), repeat(NO_STAGE))), np.int64)
        keep = (stages != NO_STAGE) & np.isfinite(compute)
        stages, compute = stages[keep], compute[keep]
        return {
            stage: float(np.median(compute[stages == stage]))
            for stage in dict.fromkeys(stages.tolist())  # in the order first seen
        }
