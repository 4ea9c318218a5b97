"""One incident, one event: when a finding opens an incident, and the words it is told in."""

from __future__ import annotations

from dataclasses import replace

from reflex_localize.flows.incidents.events import LocalizationEvent, Suspect
from reflex_localize.flows.incidents.exit_messages import hardware_hint
from reflex_localize.flows.incidents.explain import describe, describe_finding, stage_pattern
from reflex_localize.flows.judge.job_fields import RECUR_QUIET_S, clock_text
from reflex_localize.flows.judge.job_suspects import SuspectRanking
from reflex_localize.flows.judge.site_blame import SWITCH_TAG, shared_switch, switch_suspect
from reflex_localize.flows.judge.step_peers import StepFinding
from reflex_localize.flows.messages import ExplicitEvent


class IncidentTelling(SuspectRanking):
    """One incident, one event; state in :class:`JobFields`."""

    def _emit(
        self,
        window: int,
        end_ns: int,
        trigger: str,
        root: ExplicitEvent | None,
        revises: bool = False,
        causes_before_ns: int | None = None,
    ) -> LocalizationEvent | None:
        """The window's event, unless an open incident already tells it. With
        ``causes_before_ns`` (a crash's cascade), a part whose evidence all began after that
        is the crash's consequence, not its cause: GPUs idle and clocks drop as ranks exit."""
        suspects = self._suspects(root)
        if causes_before_ns is not None:
            suspects = [
                s
                for s in suspects
                if (root is not None and s.entity == root.entity)
                or min((e.since_ns for e in s.evidence), default=end_ns) < causes_before_ns
            ]
        top = suspects[0] if suspects else None
        in_cooldown = end_ns - self.last_event_ns < self.config.cooldown_s * 1e9
        critical = root is not None and root.severity == "critical"
        if root is not None and critical and self._critical_repeats(root, end_ns):
            return None  # the same part's critical error, told within the cooldown
        if critical:
            self.last_critical_ns = end_ns
        # One incident, one event: within the cooldown only an explicit error on a new node
        # opens a new incident; slowdowns, hangs and cascades belong to the open one. A
        # critical error is never one of them: it always gets an event of its own.
        if in_cooldown and not critical and not self._new_incident(root, top):
            return None
        if not in_cooldown and trigger == "regression" and self._still_told(top):
            return None
        if trigger == "regression" and root is None:
            suspects = self._held_lead(suspects, end_ns)
            top = suspects[0] if suspects else None
        if top is not None and root is None and top.score < self._bar(top.component):
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
            else shared_switch(
                [s for s in suspects if self._on_network(s)],
                self.sites,
                self.config.min_suspect_score,
            )
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
        if top is None and root is None and trigger != "explicit":
            # A slowdown's verdict may be revised by evidence that comes later; a crash's may
            # not: its ranks' GPUs idle as they exit, and the job stops making progress.
            self.info_verdict_ns = end_ns
        event = self._recurrence(event, root is None)
        named = {(s.node, s.entity) for s in suspects[:1]}
        if switch is not None:  # the switch's incident: every node under it is named
            named |= {(s.node, s.entity) for s in suspects if self._under(s.node, switch)}
        self._opened(end_ns, in_cooldown, named)
        return event

    def _on_network(self, suspect: Suspect) -> bool:
        """Whether the suspect slows through the network: a port, or a node one of whose
        ports shows slowing evidence. A switch can slow what its nodes send and receive; it
        cannot make their GPUs run hot, so GPUs alone never name it."""
        if suspect.component == "nic":
            return True
        if suspect.component != "node":
            return False
        ports = f"{suspect.node}|nic|"
        return any(
            entity.startswith(ports) and self._slowing(entity) > 0 for entity in self.book.amounts
        )

    def _under(self, node: str, switch: str) -> bool:
        return self.sites.get(node, {}).get(SWITCH_TAG) == switch

    def _critical_repeats(self, root: ExplicitEvent, end_ns: int) -> bool:
        """A critical error of a part whose critical error was told within the cooldown
        (an XID logged again, the GPU lost after its XID 79) repeats that finding; any other
        is told, and the part's time is noted."""
        cooldown_ns = self.config.cooldown_s * 1e9
        self.critical_told = {
            key: told for key, told in self.critical_told.items() if end_ns - told < cooldown_ns
        }
        # A GPU the kernel log names by bus id and NVML by index (no gpu_info to join them):
        # a critical error of its node's GPUs where either side names the part by something
        # other than its index is the same finding (the XID 79, then NVML's "GPU lost").
        finding = f"{root.node}|{root.component}"
        loose = not root.index.isdigit()
        if root.entity in self.critical_told or (
            finding in self.critical_told and (loose or finding + "~loose" in self.critical_told)
        ):
            return True
        self.critical_told[root.entity] = self.critical_told[finding] = end_ns
        if loose:
            self.critical_told[finding + "~loose"] = end_ns
        return False

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
            return top.score >= self._bar(top.component)
        previous_active = bool(self.last_event_entities & self.fresh)
        bar = 4 if previous_active else 2
        return top.score >= self._bar(top.component, bar)

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
        when = ", ".join(f"{clock_text(t)} UTC" for t in before)
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
