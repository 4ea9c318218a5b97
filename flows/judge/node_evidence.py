"""What a job's evidence adds beyond each part's own signals: a node's parts together, the
learned impact of their anomalies, a part's record from earlier jobs; and when each such
derived evidence begins and ends.

A mixin of :class:`flows.judge.job_evidence.EvidenceBook`, which holds the state.
"""

from __future__ import annotations

from reflex_localize.flows.impact.model import ImpactModel
from reflex_localize.flows.incidents.events import Evidence
from reflex_localize.flows.signals.derive import STEP_SIGNAL

RECORD_MATTERS = 1.0  # a part's trouble from earlier jobs that changes how it is judged


class NodeLevelEvidence:
    """Derived evidence over the book's state (declared here for the type checker; the
    fields live on the dataclass)."""

    since: dict[tuple[str, str], int]
    ended: dict[tuple[str, str], tuple[int, int]]
    evidence: dict[str, list[Evidence]]
    features: dict[str, dict[str, float]]
    node_parts: dict[tuple[str, str], frozenset[str]]

    def _ended(self, kind: str, still: set[str], end_ns: int) -> None:
        """A derived evidence's persistence ends when it stops, as a signal's does: else a
        part that was pressed once would count as held at every later slowdown."""
        for key in [k for k in self.since if k[1] == kind and k[0] not in still]:
            self._stop(key, end_ns)

    def _same_parts(self, key: tuple[str, str], parts: frozenset[str], end_ns: int) -> None:
        """A node's evidence gathered from its parts is one episode only while some part
        stays in it: anomalies that move from part to part every window (the hot experts of a
        mixture-of-experts model rotating over the GPUs) are the workload's, and must not add
        up to a node that has held evidence for minutes. A node-level fault (its host, its
        PCIe switch) keeps troubling the same parts."""
        before = self.node_parts.get(key)
        if before is not None and not before & parts:
            self._stop(key, end_ns)
        self.node_parts[key] = parts

    def _stop(self, key: tuple[str, str], end_ns: int) -> None:
        """Ends the key's episode (if it has one), keeping when it began and ended."""
        since = self.since.pop(key, None)
        if since is not None:
            self.ended[key] = (since, end_ns)

    def impact(self, totals: dict[str, float], model: ImpactModel, end_ns: int) -> None:
        """Evidence in proportion to the slowdown a part's anomalies predict (the learned
        impact model): per part, and per node for what its parts predict together beyond
        the strongest part alone."""
        per_node: dict[str, dict[str, float]] = {}
        best: dict[str, float] = {}
        parts_of: dict[str, set[str]] = {}
        predicted: set[str] = set()
        for entity, evidence in sorted(self.features.items()):
            node, component, _ = entity.split("|")
            own = {s: v for s, v in evidence.items() if s != STEP_SIGNAL}
            if component == "node" or not own:
                continue
            extra = model.extra_evidence(own)
            union = per_node.setdefault(node, {})
            parts_of.setdefault(node, set()).add(entity)
            for signal, value in own.items():
                union[signal] = max(union.get(signal, 0.0), value)
            best[node] = max(best.get(node, 0.0), extra)
            if extra > 0:
                self._add(totals, entity, extra, model, own, end_ns)
                predicted.add(entity)
        for node, union in per_node.items():
            together = model.extra_evidence(union) - best[node]
            if together > 1e-9:
                self._same_parts((f"{node}|node|-", "impact"), frozenset(parts_of[node]), end_ns)
                self._add(totals, f"{node}|node|-", together, model, union, end_ns)
                predicted.add(f"{node}|node|-")
        self._ended("impact", predicted, end_ns)

    def _add(
        self,
        totals: dict[str, float],
        entity: str,
        extra: float,
        model: ImpactModel,
        evidence: dict[str, float],
        end_ns: int,
    ) -> None:
        totals[entity] = totals.get(entity, 0.0) + extra
        predicted = 100 * model.predict(evidence)
        since = self.since.setdefault((entity, "impact"), end_ns)
        kept = [e for e in self.evidence.get(entity, []) if not e.signal.startswith("impact")]
        note = Evidence(f"impact: predicts {predicted:.1f}% slower", None, None, extra, since)
        self.evidence[entity] = [*kept, note]

    def node_compound(
        self, totals: dict[str, float], end_ns: int, corrected: dict[str, float] | None = None
    ) -> None:
        """Small anomalies spread over one node's parts add up to the node: the node gets
        what its parts gathered beyond the strongest one, so one loud part still leads on its
        own and only evidence spread over several parts makes the node the suspect. Only what
        shows a part slowing adds up (``corrected``: corrected errors, and the credit waits
        of ports the fabric holds back): every rail of a node waiting in a congested fabric
        is the fabric's, not the node's."""
        per_node: dict[str, list[tuple[str, float]]] = {}
        for entity, total in totals.items():
            node, component, _ = entity.split("|")
            amount = total - (corrected or {}).get(entity, 0.0)
            if component != "node" and amount > 1e-9:
                per_node.setdefault(node, []).append((entity, amount))
        for node, parts in sorted(per_node.items()):
            if len(parts) < 2:
                continue
            spread = sum(a for _, a in parts) - max(a for _, a in parts)
            entity = f"{node}|node|-"
            totals[entity] = totals.get(entity, 0.0) + spread
            named = ", ".join(e.split("|", 1)[1].replace("|", " ") for e, _ in sorted(parts))
            self._same_parts((entity, "node_compound"), frozenset(e for e, _ in parts), end_ns)
            since = self.since.setdefault((entity, "node_compound"), end_ns)
            kept = [e for e in self.evidence.get(entity, []) if not e.signal.startswith("node_")]
            note = Evidence(f"node_compound: {named}"[:120], None, None, spread, since)
            self.evidence[entity] = [*kept, note]
        for key in [k for k in self.since if k[1] == "node_compound"]:
            if (
                key[0].split("|", 1)[0] not in per_node
                or len(per_node[key[0].split("|", 1)[0]]) < 2
            ):
                self._stop(key, end_ns)

    def history(
        self, totals: dict[str, float], records: dict[str, tuple[float, str]], end_ns: int
    ) -> None:
        """A part that came to the job with a record (flows/incidents/node_memory.py) has its fresh
        evidence weighed up to twice: the same anomaly on a part that failed before is
        likelier the fault. A record alone, without fresh evidence, adds nothing."""
        weighed: set[str] = set()
        for entity, amount in list(totals.items()):
            trouble, why = records.get(entity, (0.0, ""))
            if amount <= 0 or trouble < RECORD_MATTERS:
                continue
            weighed.add(entity)
            extra = amount * min(trouble / 4.0, 1.0)
            totals[entity] = amount + extra
            since = self.since.setdefault((entity, "record"), end_ns)
            kept = [e for e in self.evidence.get(entity, []) if not e.signal.startswith("record")]
            note = Evidence(f"record from earlier jobs: {why}"[:120], None, None, extra, since)
            self.evidence[entity] = [*kept, note]
        self._ended("record", weighed, end_ns)
