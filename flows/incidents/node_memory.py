"""A record per node component that outlives the job: memory that follows the node.

A part with an intermittent fault moves from one job to the next, and the faults that end a
job are the ones that recur (Meta's "lemon nodes", Kokolis et al., HPCA 2025). Job state is
dropped when a job ends; this record lives in the shard that owns the node, is saved with the
flow's recovery state and exported to InfluxDB (``reflex_record``). It holds, per entity:

* trouble: a score decaying with a half-life of days, fed by the part's own errors (XIDs of
  every class), by strong departures from its own history on a GPU or NIC signal, and by its
  GPU computing slower than the other GPUs of its node (a straggler seen inside one shard);
* the XIDs it logged, per code, with their times (kept for the same horizon).

A job that gets a node with a record weighs that part's fresh evidence more (suspected sooner,
named surer) and its events say why; a GPU with a record that slows its rank again for a few
steps is told on that alone (flows/incidents/returning_part.py). An application-class XID
(13, 31) that repeats on one GPU, in this job or across jobs, stops being the application's problem.

>>> memory = NodeMemory()
>>> day = 86_400 * 10**9
>>> memory.note("n1|gpu|3", 4.0, 0, "xid 79")
>>> round(memory.trouble("n1|gpu|3", 3 * day), 2)  # one half-life later
2.0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

HALF_LIFE_NS = 3 * 86_400 * 10**9
FORGET_BELOW = 0.05
REPEATS_THAT_MATTER = 3  # an application fault this often on one GPU points at the GPU
# XIDs of one GPU this close together are one fault: an application's page fault logs XID 31,
# then 43 as its channel stops and 45 as it is cleaned up (NVIDIA's catalogue: 43 "often
# follows an application fault", 45 "after a prior error"), all within about a second.
ONE_FAULT_NS = 10_000_000_000
# What one observation adds to a part's trouble.
XID_TROUBLE = {"critical": 4.0, "warning": 2.0, "application": 0.5}
DEVIATION_TROUBLE = 0.2  # a window strongly off the part's own history
STRAGGLE_TROUBLE = 0.3  # a window in which the GPU computed slower than its node's others


@dataclass
class Record:
    trouble: float = 0.0
    updated_ns: int = 0
    reasons: dict[str, int] = field(default_factory=dict)  # what fed it, how often
    xids: dict[int, list[int]] = field(default_factory=dict)  # code -> times (ns)


@dataclass
class NodeMemory:
    records: dict[str, Record] = field(default_factory=dict)

    def _decayed(self, record: Record, now_ns: int) -> float:
        age = max(now_ns - record.updated_ns, 0)
        return record.trouble * 0.5 ** (age / HALF_LIFE_NS)

    def note(self, entity: str, amount: float, now_ns: int, reason: str) -> None:
        record = self.records.setdefault(entity, Record(updated_ns=now_ns))
        record.trouble = self._decayed(record, now_ns) + amount
        record.updated_ns = max(record.updated_ns, now_ns)
        record.reasons[reason] = record.reasons.get(reason, 0) + 1

    def note_xid(self, entity: str, code: int, severity: str, now_ns: int) -> int:
        """Records an XID; returns how many faults the part's XIDs within the horizon tell
        (this one too, whatever their codes: XID 13 in one job and 31 in the next is one
        GPU's story; XIDs within ``ONE_FAULT_NS`` of the one before are one fault).

        >>> memory = NodeMemory()
        >>> [memory.note_xid("n|gpu|1", c, "application", t) for c, t in ((31, 0), (43, 4e8))]
        [1, 1]
        >>> memory.note_xid("n|gpu|1", 31, "application", 75_000_000_000)
        2
        """
        record = self.records.setdefault(entity, Record(updated_ns=now_ns))
        horizon = now_ns - 4 * HALF_LIFE_NS
        for known in list(record.xids):
            record.xids[known] = [t for t in record.xids[known] if t >= horizon]
        record.xids[code] = [*record.xids.get(code, []), int(now_ns)][-32:]
        self.note(entity, XID_TROUBLE.get(severity, 1.0), now_ns, f"xid {code}")
        times = sorted(t for kept in record.xids.values() for t in kept)
        return 1 + sum(1 for a, b in pairwise(times) if b - a > ONE_FAULT_NS)

    def trouble(self, entity: str, now_ns: int) -> float:
        record = self.records.get(entity)
        return 0.0 if record is None else self._decayed(record, now_ns)

    def why(self, entity: str) -> str:
        """The record in words, for an event: what fed it and how often."""
        record = self.records.get(entity)
        if record is None:
            return ""
        parts = sorted(record.reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        return ", ".join(f"{reason} x{count}" for reason, count in parts[:4])

    def of_nodes(self, nodes: set[str], now_ns: int) -> dict[str, tuple[float, str]]:
        """Entity -> (trouble now, why) for the parts of these nodes that have a record."""
        out = {}
        for entity in self.records:
            if entity.split("|", 1)[0] in nodes:
                trouble = self.trouble(entity, now_ns)
                if trouble >= FORGET_BELOW:
                    out[entity] = (round(trouble, 3), self.why(entity))
        return out

    def forget_old(self, now_ns: int) -> None:
        """Bounded memory: a record decayed to nothing is dropped."""
        self.records = {
            e: r for e, r in self.records.items() if self._decayed(r, now_ns) >= FORGET_BELOW
        }
