"""Ranks a job's suspects and says which of them held long enough to name."""

from __future__ import annotations

import numpy as np

from reflex_localize.flows.impact.model import ImpactModel
from reflex_localize.flows.impact.model_file import ImpactModelFile
from reflex_localize.flows.incidents.events import Suspect
from reflex_localize.flows.judge.job_evidence import FABRIC_WIDE_NODES
from reflex_localize.flows.judge.job_fields import (
    DEFAULT_PROFILE,
    INFO_MIN_SLOWDOWN,
    PERSIST_WINDOWS,
    JobFields,
)
from reflex_localize.flows.judge.site_blame import SWITCH_TAG
from reflex_localize.flows.messages import ExplicitEvent
from reflex_localize.flows.signals.derive import STEP_SIGNAL

# Evidence that began this long before a slowdown's onset is a standing condition of its part.
STANDING_S = 600.0


class SuspectRanking(JobFields):
    """Ranks a job's suspects, and says which held long enough to name (state: JobFields)."""

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

    def _suspect(self, entity: str) -> Suspect:
        node, component, index = entity.split("|")
        score = round(self.compound.get(entity), 3)
        return Suspect(node, component, index, score, self.book.notes(entity)[:6])

    def _sites_of(self, suspects: list[Suspect]) -> dict[str, dict[str, str]]:
        return {s.node: self.sites[s.node] for s in suspects if s.node in self.sites}

    def _weights(self, profile: str) -> dict[str, float]:
        return self.config.weights.get(profile) or self.config.weights.get(DEFAULT_PROFILE, {})

    def _learned(self) -> ImpactModel | None:
        """The impact model, where this mode weighs evidence with it."""
        impact = self.config.impact if self.config.mode == "reflex" else None
        return impact.current() if isinstance(impact, ImpactModelFile) else impact

    def _slowing(self, entity: str) -> float:
        """The part's score without what corrected errors and suffered congestion gave it. A
        regression is a slowdown: the part it names must show slowness (a signal off its
        history or peers, slow steps, the back-pressure of others waiting on it), and a
        corrected MCE or remap, or a port's own credit waits with no faulty receiver to give
        them to, is no sign of that. Such evidence still ranks the parts that do show it. (A
        benign soak named a host for a regression because two corrected MCEs arrived in the
        window it fired.)"""
        return self.compound.get(entity) - self.corrected.get(entity)

    def _slowing_lead(self, suspects: list[Suspect]) -> list[Suspect]:
        """The suspects from the first whose slowing score is worth naming (see _slowing)."""
        lead = 0
        while lead < len(suspects) and (
            self._slowing(suspects[lead].entity) < self._bar(suspects[lead].component)
        ):
            lead += 1
        return suspects[lead:]

    def _held_lead(self, suspects: list[Suspect], end_ns: int) -> list[Suspect]:
        """The suspects whose evidence held, from the first whose slowing score is worth
        naming: whom a regression's event leads with."""
        held = [s for s in suspects if self._held(s.entity, end_ns)]
        return self._slowing_lead(self._changed_first(self._local(held)))

    def _local(self, suspects: list[Suspect]) -> list[Suspect]:
        """The suspects whose evidence is their own: a part whose every signal this window is
        one that a quarter of the job's nodes (three at least, not all under one switch) show
        at once (fabric-wide congestion, a shared filesystem) is the fabric's or the site's,
        never a node's lead. A node's compound counts by its parts' signals. Nodes all under
        one switch stay, for the switch rule."""
        nodes_with: dict[str, set[str]] = {}
        signals_of: dict[str, set[str]] = {}
        for entity, amounts in self.book.amounts.items():
            node = entity.split("|", 1)[0]
            for signal, amount in amounts.items():
                if amount > 0:
                    nodes_with.setdefault(signal, set()).add(node)
                    signals_of.setdefault(entity, set()).add(signal)
                    signals_of.setdefault(f"{node}|node|-", set()).add(signal)
        bar = max(FABRIC_WIDE_NODES, self.node_count / 4)
        wide = {
            signal
            for signal, nodes in nodes_with.items()
            if len(nodes) >= bar and not self._one_switch(nodes)
        }
        if not wide:
            return suspects
        return [s for s in suspects if not signals_of.get(s.entity) or signals_of[s.entity] - wide]

    def _one_switch(self, nodes: set[str]) -> bool:
        """Every one of the nodes hangs under one known switch."""
        switches = {self.sites.get(node, {}).get(SWITCH_TAG) for node in nodes}
        return len(switches) == 1 and None not in switches

    def _changed_first(self, suspects: list[Suspect]) -> list[Suspect]:
        """Parts whose state changed about when the job slowed come before parts whose every
        evidence stood long before (STANDING_S): a noisy port that has erred all along did not
        slow a job that slowed only now, however high its score has piled up."""
        onset = self.slowdown_onset_ns
        if onset >= 2**62:
            return suspects
        cutoff = onset - STANDING_S * 1e9
        changed = [any(e.since_ns >= cutoff for e in s.evidence) for s in suspects]
        return [s for s, c in zip(suspects, changed, strict=True) if c] + [
            s for s, c in zip(suspects, changed, strict=True) if not c
        ]

    def _strong_suspect(self, end_ns: int) -> Suspect | None:
        """The strongest suspect with fresh evidence that held and a score worth naming: the
        one the regression's event would lead with. A stronger part whose evidence comes and
        goes (a GPU throttling 10 s in 120) does not hide a held one below it."""
        fresh = [s for s in self._suspects(None) if s.entity in self.fresh]
        suspects = self._held_lead(fresh, end_ns)
        return suspects[0] if suspects else None

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

    def _slight(self) -> bool:
        """The job's step time is less than INFO_MIN_SLOWDOWN above its learned level."""
        level = self.regression.level()
        return level > 0 and self.step_now < level * (1 + INFO_MIN_SLOWDOWN)

    def _bar(self, component: str, prior_times: float = 1.0) -> float:
        """The score that names a part of this kind: ``prior_times`` the prior bar, raised
        to the tail of this fleet's scores of such parts that the alarm budget allows."""
        return prior_times * self.budget.bar(
            f"score|{component}",
            self.config.min_suspect_score,
            budget=self.config.alarm_budget,
            samples_per_window=self.samples_per_window.get(f"score|{component}", 1.0),
            nodes=self.node_count,
            window_s=self.config.window_seconds,
        )

    def _observe_scores(self, entities: np.ndarray) -> None:
        """This window's slowing score of every part of the job, by kind, into the budget's
        tails (the parts an open incident named are left out: a fault must not raise its own
        bar); and how many samples of each kind a window gives."""
        nodes = {info.node for info in self.members.values()}
        by_kind: dict[str, list[float]] = {"node": []}
        for entity in [*entities.tolist(), *(f"{node}|node|-" for node in sorted(nodes))]:
            if entity not in self.last_event_entities:
                by_kind.setdefault(entity.split("|")[1], []).append(self._slowing(entity))
        for kind, values in by_kind.items():
            if values:
                self.budget.observe(f"score|{kind}", np.array(values))
                self.samples_per_window[f"score|{kind}"] = float(len(values))
        self.node_count = len(nodes)
