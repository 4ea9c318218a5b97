"""Findings that name one part: stragglers, drifts, communication stragglers, corrupted replicas."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from reflex_localize.flows.incidents.events import Evidence, LocalizationEvent, Suspect
from reflex_localize.flows.incidents.returning_part import returning_part
from reflex_localize.flows.judge.explained_straggler import (
    explaining_part,
    learned_enough,
    predicted_slowdown,
)
from reflex_localize.flows.judge.job_evidence import SLOWING_STATES, place_stragglers, rank_entity
from reflex_localize.flows.judge.job_fields import (
    CLOCK_COLUMN,
    COMM_FAULTS,
    COMM_SHARE,
    HOLD_WINDOWS,
    POWER_CAP_COLUMN,
    POWER_COLUMN,
    THROTTLE_COLUMNS,
    clock_text,
    rank_label,
)
from reflex_localize.flows.judge.job_telling import IncidentTelling
from reflex_localize.flows.judge.loss_divergence import LOSS_SIGNAL, diverging_ranks, spans
from reflex_localize.flows.judge.nic_roles import RAIL
from reflex_localize.flows.judge.site_blame import shared_switch, switch_suspect
from reflex_localize.flows.judge.step_peers import StepFinding
from reflex_localize.flows.messages import JobWindow
from reflex_localize.flows.signals.derive import STEP_SIGNAL


class PartFindings(IncidentTelling):
    """Findings that name one part; state in :class:`JobFields`."""

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
        label = rank_label(self.members[lead_rank.rank])
        return self._lead_event(
            window, end_ns, "straggler", by_rank[lead_rank.rank], lead, rank_label=label
        )

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
        label = rank_label(self.members[finding.rank])
        event = self._lead_event(window, end_ns, "straggler", finding, lead, rank_label=label)
        if event is None:
            return None
        # Its node's other slow ranks are this incident, told with it.
        self.step_peers.marginal_told.update(r for r, i in self.members.items() if i.node == node)
        why = (
            f"; {found.signal} on its {component} stands {found.peer_z:.0f} spreads off its "
            f"peers' since {clock_text(found.since_ns)} UTC (a part slow from the job's start has "
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
        label = rank_label(self.members[finding.rank])
        event = self._lead_event(window, end_ns, "straggler", finding, lead, rank_label=label)
        if event is None:
            return None
        self.step_peers.marginal_told.add(finding.rank)
        _, why = (self.history or {}).get(found.entity, (0.0, ""))
        told = (
            f"; it came to this job with a record from earlier jobs ({why}), and its "
            f"{note.signal} stands {abs(note.temporal_z or 0.0):.0f} spreads off its own "
            f"history since {clock_text(note.since_ns)} UTC: the part that failed before, failing "
            "again"
        )
        return replace(event, summary=event.summary + told)

    def _observe_clocks(self, entities: np.ndarray, values: np.ndarray) -> None:
        """Each rank's GPU clock this window, for the rank's own-history view (drifts), and a
        one-node job's GPUs together (node drifts). One pass over the ranks' rows: this runs
        every window of every job."""
        self.node_gpus = None
        if self.config.mode == "peer_only" or not len(entities) or not self.members:
            return
        row_of = {entity: row for row, entity in enumerate(entities.tolist())}
        ranks, rows = [], []
        for rank, info in self.members.items():
            row = row_of.get(rank_entity(info))
            if row is not None:
                ranks.append(rank)
                rows.append(row)
        if not rows:
            self.step_peers.drift.observe_clocks({}, set(), set())
            return
        mine = values[rows]
        throttle = np.nan_to_num(mine[:, THROTTLE_COLUMNS]).any(axis=1)
        reason = throttle | (np.nan_to_num(mine[:, POWER_CAP_COLUMN]) > 0)
        clocks = dict(zip(ranks, mine[:, CLOCK_COLUMN].tolist(), strict=True))
        throttled = {r for r, t in zip(ranks, throttle.tolist(), strict=True) if t}
        reasoned = {r for r, t in zip(ranks, reason.tolist(), strict=True) if t}
        self.step_peers.drift.observe_clocks(clocks, throttled, reasoned)
        if len({info.node for info in self.members.values()}) == 1:
            gpus = np.unique(np.array(rows))  # each GPU once, whatever ranks share it
            own = values[gpus]
            why = np.nan_to_num(own[:, THROTTLE_COLUMNS]).any(axis=1) | (
                np.nan_to_num(own[:, POWER_CAP_COLUMN]) > 0
            )
            clock, power = _median(own[~why, CLOCK_COLUMN]), _median(own[:, POWER_COLUMN])
            self.node_gpus = (clock, power, 2 * int(why.sum()) > len(own))

    def _node_drift_findings(self, parts: list[JobWindow], end_ns: int) -> list[StepFinding]:
        """A one-node job slower than its own history with its GPUs' clock, drawing no more
        power (flows/judge/node_drift.py): a finding on the node, as a rank's drift is."""
        if self.node_gpus is None or self.config.mode == "peer_only":
            return []
        compute = np.concatenate([p.steps.compute for p in parts])
        if not np.isfinite(compute).any():
            compute = np.concatenate(
                [p.steps.step_time - np.nan_to_num(p.steps.checkpoint) for p in parts]
            )
        known = compute[np.isfinite(compute) & (compute > 0)]
        level = float(np.median(known)) if len(known) else math.nan
        clock, power, reasoned = self.node_gpus
        found = self.node_drift.observe(level, clock, power, end_ns, reasoned)
        return [
            StepFinding("node_drift", -1, 1 + d.shift, d.clock_drop, d.steps, d.since_ns)
            for d in found
        ]

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
        of_node = [f for f in drifts if f.kind == "node_drift"]
        drifts = [f for f in drifts if f.rank in self.members]
        if self.config.mode == "peer_only":
            return None
        if not drifts:
            return self._node_drifted(window, end_ns, of_node[0]) if of_node else None
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
        label = rank_label(info)
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

    def _node_drifted(
        self, window: int, end_ns: int, finding: StepFinding
    ) -> LocalizationEvent | None:
        """A one-node job slower than its own history with every GPU's clock
        (flows/judge/node_drift.py): the node leads, its GPUs follow in order."""
        node = next(iter(self.members.values())).node
        evidence = [
            Evidence("sm_clock_low", None, None, round(finding.z, 4), finding.since_ns),
            Evidence(STEP_SIGNAL, None, None, finding.ratio, finding.since_ns),
        ]
        lead = Suspect(node, "node", "-", round(self.compound.get(f"{node}|node|-"), 3), evidence)
        gpus = sorted({info.gpu for info in self.members.values()})
        named = [lead, *(self._suspect(f"{node}|gpu|{gpu}") for gpu in gpus)]
        return self._lead_event(window, end_ns, "drift", finding, lead, suspects=named)

    def _comm_straggler(
        self, window: int, end_ns: int, parts: list[JobWindow]
    ) -> LocalizationEvent | None:
        """A part that slows the job's communication, not its compute: every rank then waits
        in its collectives alike, so no rank's own times stand out, and the part's own fault
        signals are the evidence (a port trained down, retraining, erroring; a GPU's PCIe or
        NVLink down). Told when such evidence has held for 3 windows, stands above twice the
        naming threshold, and the job spends a real share of its steps communicating. A port
        that is no rail (storage, data loading, management) counts only on a departure from
        its own history: what it has always been (a 25 GbE port beside 400 Gb/s rails) is no
        fault, but a storage port that renegotiated down starves the ranks of their data."""
        held = end_ns - HOLD_WINDOWS * self.config.window_seconds * 1e9
        candidates = []
        for entity in self.fresh:
            rail = self.book.nic_role.get(entity, RAIL) == RAIL
            signals = [
                e for e in self.book.notes(entity)
                if e.signal in COMM_FAULTS and e.since_ns <= held and e.weight > 0
                and (rail or _off_own_history(e))
            ]  # fmt: skip
            score = self.compound.get(entity)
            if signals and score >= self._bar(entity.split("|")[1], 2):
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
        elif self.book.nic_role.get(entity, RAIL) != RAIL:
            label = "no rail: a storage, data or management port, below its own history"
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


def _off_own_history(evidence: Evidence) -> bool:
    """The evidence stands off the part's own history, not only off its peers."""
    return evidence.temporal_z is not None and abs(evidence.temporal_z) >= OWN_HISTORY_Z


# Spreads off its own history at which a port that is no rail counts as changed.
OWN_HISTORY_Z = 3.0


def _median(values: np.ndarray) -> float:
    """The median of the finite values (NaN: none), without numpy's warning on an empty one."""
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if len(finite) else math.nan
