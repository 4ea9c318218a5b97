"""A rank a little slow, explained by the part it runs on.

A rank 5-15% slower than its stage peers step after step is not a straggler by itself: a quirk
of its part looks the same, and a part slow from the job's first step has no "before" in this
job, nor in its own history, which began with the fault (a local disk failing when the job
landed on the node, an HBM clock stuck low). Its peers still see it. Such a rank is told when
a part it runs on explains it: its GPU, or its node's host, in a state that slows a rank
(clocks, throttles, a busy disk, CPU or memory pressure) far off its peers, for at least half
of the slow streak. NICs are left to the communication straggler: they slow collectives, not
a rank's compute.

>>> from reflex_localize.flows.messages import RankInfo
>>> members = {3: RankInfo(3, "n2", 3, 0, 3, 0, 1, "h100")}
>>> slow = [StepFinding("marginal", 3, 1.12, steps=9, since_ns=0)]
>>> held = {("n2|host|-", "disk_busy"): (10 * 10**9, 18.0)}
>>> found = explaining_part(slow, members, held, end_ns=400 * 10**9, window_ns=10 * 10**9)
>>> found.entity, found.signal, found.peer_z
('n2|host|-', 'disk_busy', 18.0)
>>> explaining_part(slow, members, {}, end_ns=400 * 10**9, window_ns=10 * 10**9) is None
True
"""

from __future__ import annotations

from dataclasses import dataclass

from reflex_localize.flows.job_evidence import rank_entity
from reflex_localize.flows.messages import RankInfo
from reflex_localize.flows.step_peers import StepFinding

MIN_HELD_WINDOWS = 3  # the part's state held at least this long, whatever the streak


@dataclass(frozen=True)
class Explained:
    finding: StepFinding  # the slow rank's streak
    entity: str  # the part that explains it
    signal: str
    since_ns: int  # since when the part's state stood off its peers
    peer_z: float


def explaining_part(
    marginal: list[StepFinding],
    members: dict[int, RankInfo],
    peer_since: dict[tuple[str, str], tuple[int, float]],
    end_ns: int,
    window_ns: float,
) -> Explained | None:
    """The marginal rank best explained (its part furthest off its peers, then the slower
    rank), or None when no part of any marginal rank explains it."""
    best: tuple[tuple[float, float], Explained] | None = None
    for finding in marginal:
        info = members.get(finding.rank)
        if info is None:
            continue
        held_by = end_ns - max(MIN_HELD_WINDOWS * window_ns, (end_ns - finding.since_ns) / 2)
        parts = {rank_entity(info), f"{info.node}|host|-"}
        for (entity, signal), (since, z) in peer_since.items():
            if entity not in parts or since > held_by:
                continue
            key = (z, finding.ratio)
            if best is None or key > best[0]:
                best = (key, Explained(finding, entity, signal, since, z))
    return None if best is None else best[1]
