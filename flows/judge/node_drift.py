"""A job on one node drifting slower with every GPU's clock: the node's cooling or power.

A rank's drift (:mod:`flows.judge.rank_drift`) is its compute against the job's level, the
median of the faster half of all ranks. When every GPU of a one-node job drifts together (a
fan wall, an inlet, a power shelf: one chassis cause) the level drifts with them, no rank
stands out, and there is no other node to out-vote it; most jobs in shared clusters are that
small (Kokolis et al., HPCA 2025). Only the job's own history shows the change.

So a job whose ranks all run on one node keeps one more view, the same detector over the job
itself: per window, the median compute of its steps (its step time where the hook gives no
compute) is the "ratio", and the median clock of the node's GPUs in windows without a clock
reason the "clock". A drift is told as a rank's is (the level held ``DRIFT_SHIFT`` above its
own for ``HOLD_STEPS`` windows and ``HOLD_S`` seconds since a change point, the clock
``CLOCK_DROP`` below its own from before), and only while the GPUs draw no more power than
before (``POWER_RISE``): a heavier workload slows the steps, heats the GPUs and lowers GPU
Boost's clock too, but it draws more power; a cooling or power fault gives the same load less
clock.

>>> drift = NodeDrift()
>>> told = []
>>> for w in range(40):  # the job 4% slower from window 20, every GPU's clock 5% lower
...     after = w >= 20
...     clock = 1852.0 if after else 1950.0
...     told += drift.observe(1.04 if after else 1.0, clock, 600.0, w * 10**10)
>>> [(round(d.shift, 2), round(d.clock_drop, 3), d.since_ns // 10**10) for d in told]
[(0.04, 0.05, 22)]
>>> harder = NodeDrift()  # the same, drawing 10% more power: the workload, not the node
>>> sum(len(harder.observe(1.04 if w >= 20 else 1.0, 1852.0 if w >= 20 else 1950.0,
...     660.0 if w >= 20 else 600.0, w * 10**10)) for w in range(40))
0
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from reflex_localize.flows.judge.rank_drift import Drift, RankDrift
from reflex_localize.flows.state_upgrade import FieldsFilledOnRestore

POWER_RISE = 0.03  # the GPUs' median power since the change point, over before
KEEP_POWER = 120  # windows of the node's power kept (20 minutes at 10 s)
_JOB = 0  # the one "rank" the job's view watches


@dataclass
class NodeDrift(FieldsFilledOnRestore):
    """Per one-node job: the job's own level and its GPUs' clock and power, window by window."""

    level: RankDrift = field(default_factory=RankDrift)
    power: list[tuple[int, float]] = field(default_factory=list)  # (window end, median watts)

    def observe(
        self, compute: float, clock: float, power: float, end_ns: int, reasoned: bool = False
    ) -> list[Drift]:
        """One window: the job's median compute, its GPUs' median clock and power, and whether
        most of them had a clock reason (a throttle, the power cap). Returns a drift once."""
        if math.isfinite(power):
            self.power.append((end_ns, power))
            del self.power[:-KEEP_POWER]
        self.level.observe_clocks({_JOB: clock}, set(), {_JOB} if reasoned else set())
        if reasoned:  # a clock the GPUs were told to hold says nothing of the node
            return []
        found = self.level.observe_step({_JOB: compute}, end_ns)
        return [d for d in found if not self._working_harder(d.since_ns)]

    def _working_harder(self, since_ns: int) -> bool:
        before = [w for t, w in self.power if t < since_ns]
        after = [w for t, w in self.power if t >= since_ns]
        if not before or not after:
            return False
        return statistics.median(after) > (1 + POWER_RISE) * statistics.median(before)
