"""A rank a little slow, explained by the part it runs on.

A rank 5-15% slower than its stage peers step after step is not a straggler by itself: a quirk
of its part looks the same, and a part slow from the job's first step has no "before" in this
job, nor in its own history, which began with the fault (a local disk failing when the job
landed on the node, an HBM clock stuck low). Its peers still see it. Such a rank is told when
a part it runs on explains it: its GPU, or its node's host, in a state that slows a rank
(clocks, throttles, a busy disk, CPU or memory pressure) far off its peers, for at least half
of the slow streak. NICs are left to the communication straggler: they slow collectives, not
a rank's compute. With a learned impact model (flows/impact/model.py), a state the fleet's own
history says slows a rank counts too, where what the part shows predicts at least half of
the rank's excess (``enough``): the fleet, not this list, knows that its NVLink errors cost.

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

from collections.abc import Callable
from dataclasses import dataclass

from reflex_localize.flows.impact.model import ImpactModel
from reflex_localize.flows.judge.job_evidence import SLOWING_STATES, rank_entity
from reflex_localize.flows.judge.step_peers import StepFinding
from reflex_localize.flows.messages import RankInfo
from reflex_localize.flows.signals.derive import STEP_SIGNAL

MIN_HELD_WINDOWS = 3  # the part's state held at least this long, whatever the streak
LEARNED_SHARE = 0.5  # of a rank's excess that a learned state's predicted slowdown must cover
# A lower SM clock or power draw is how fast the part runs, not why: the model rightly learns
# that it goes with a slower rank, and a binned part shows it all its life (healthy GPUs of one
# SKU differ by 8%, Sinha et al., SC22). It explains nothing, learned or not.
SPEED_ITSELF = frozenset(("sm_clock_low", "power_low"))


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
    enough: Callable[[str, str, float], bool] | None = None,
) -> Explained | None:
    """The marginal rank best explained (its part furthest off its peers, then the slower
    rank), or None when no part of any marginal rank explains it. ``enough(entity, signal,
    excess)`` may turn a part's state down for a rank this much slower than its peers."""
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
            if enough is not None and not enough(entity, signal, finding.ratio - 1.0):
                continue
            key = (z, finding.ratio)
            if best is None or key > best[0]:
                best = (key, Explained(finding, entity, signal, since, z))
    return None if best is None else best[1]


def learned_slowing(model: ImpactModel | None) -> tuple[str, ...]:
    """The states that may explain a slow rank: those known to slow one, and those the fleet's
    impact model learned do (GPU and host states only, as above; never the part's speed)."""
    if model is None:
        return SLOWING_STATES
    learned = model.slowing_states(frozenset(("gpu", "host")))
    extra = tuple(s for s in learned if s not in SLOWING_STATES and s not in SPEED_ITSELF)
    return SLOWING_STATES + extra if extra else SLOWING_STATES


def learned_enough(
    model: ImpactModel, features: dict[str, dict[str, float]]
) -> Callable[[str, str, float], bool]:
    """A learned state explains a rank only where what its part shows now predicts at least
    half of the rank's excess: a trickle of a costly error does not explain 10%."""

    def enough(entity: str, signal: str, excess: float) -> bool:
        if signal in SLOWING_STATES:
            return True
        return predicted_slowdown(model, features, entity) >= LEARNED_SHARE * excess

    return enough


def predicted_slowdown(
    model: ImpactModel, features: dict[str, dict[str, float]], entity: str
) -> float:
    """What the part's anomalies this window predict of its rank (not its own slowness)."""
    shown = {s: v for s, v in features.get(entity, {}).items() if s != STEP_SIGNAL}
    return model.predict(shown)
