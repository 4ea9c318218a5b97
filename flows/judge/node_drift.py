"""A job on one node drifting slower with every GPU's clock: the node's cooling or power.

A rank's drift (:mod:`flows.judge.rank_drift`) is its compute against the job's level, the
median of the faster half of all ranks. When every GPU of a one-node job drifts together (a
fan wall, an inlet, a power shelf: one chassis cause) the level drifts with them, no rank
stands out, and there is no other node to out-vote it; most jobs in shared clusters are that
small (Kokolis et al., HPCA 2025). Only the job's own history shows the change.

So a job whose ranks all run on one node keeps one more view, window by window: the median
clock of the node's GPUs in windows without a clock reason, their median power, and the
median compute of the job's steps (its step time where the hook gives no compute). The clock
is the precise signal (a GPU without a reason bit runs at the clock it is allowed, steady
within a few MHz): a drop opens when it falls ``CLOCK_DROP`` below its own steady median. The
drift is told once the drop has held ``HOLD_S`` and ``HOLD_WINDOWS`` windows, the job computes
at least half the drop slower than before it (``COST_SHARE``: a slower clock that costs the
job nothing is not told), and the GPUs draw no more power than before (``POWER_RISE``): a
heavier workload slows the steps, heats the GPUs and lowers GPU Boost's clock too, but it
draws more power; a cooling or power fault gives the same load less clock. Windows far below
(``IDLE``: a checkpoint, an evaluation pass with the GPUs idle) say nothing of a drift.

>>> drift = NodeDrift()
>>> told = []
>>> for w in range(40):  # the job 4% slower from window 20, every GPU's clock 5% lower
...     after = w >= 20
...     clock = 1852.0 if after else 1950.0
...     told += drift.observe(1.04 if after else 1.0, clock, 600.0, w * 10**10)
>>> [(round(d.shift, 2), round(d.clock_drop, 3), d.since_ns // 10**10) for d in told]
[(0.04, 0.05, 20)]
>>> harder = NodeDrift()  # the same, drawing 10% more power: the workload, not the node
>>> sum(len(harder.observe(1.04 if w >= 20 else 1.0, 1852.0 if w >= 20 else 1950.0,
...     660.0 if w >= 20 else 600.0, w * 10**10)) for w in range(40))
0
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from reflex_localize.flows.judge.rank_drift import CLOCK_DROP, HOLD_S, STEADY_CLOCKS, Drift
from reflex_localize.flows.state_upgrade import FieldsFilledOnRestore

HOLD_WINDOWS = 6
COST_SHARE = 0.5  # the job's compute at least this share of the clock's drop slower
POWER_RISE = 0.03  # the GPUs' median power since the drop, over before
IDLE = 0.9  # a window's clock below this share of the steady one: idle GPUs, not a drift
WARMUP = 12  # steady windows before the node's own clock is trusted
KEEP = 120  # windows of compute kept (20 minutes at 10 s; bounded memory)


@dataclass
class NodeDrift(FieldsFilledOnRestore):
    """Per one-node job: its GPUs' clock and power and its compute, window by window."""

    steady_clocks: list[float] = field(default_factory=list)
    steady_power: list[float] = field(default_factory=list)
    compute: list[tuple[int, float]] = field(default_factory=list)  # (window end, median)
    since_ns: int = -1  # the first window of an open drop (-1: none)
    clocks: list[float] = field(default_factory=list)  # since the drop
    power: list[float] = field(default_factory=list)
    told: bool = False

    def observe(
        self, compute: float, clock: float, power: float, end_ns: int, reasoned: bool = False
    ) -> list[Drift]:
        """One window: the job's median compute, its GPUs' median clock and power, and whether
        most of them had a clock reason (a throttle, the power cap). Returns a drift once."""
        if math.isfinite(compute) and compute > 0:
            self.compute = [*self.compute, (end_ns, compute)][-KEEP:]
        if reasoned or not (math.isfinite(clock) and clock > 0):
            return []  # a clock the GPUs were told to hold says nothing of the node
        steady = statistics.median(self.steady_clocks) if self.steady_clocks else 0.0
        if len(self.steady_clocks) < WARMUP:
            self._steady(clock, power)
            return []
        if clock < IDLE * steady:
            return []
        if clock >= (1 - CLOCK_DROP / 2) * steady:  # at its own level: no drop, or it ended
            self.since_ns, self.clocks, self.power, self.told = -1, [], [], False
            self._steady(clock, power)
            return []
        if clock > (1 - CLOCK_DROP) * steady and self.since_ns < 0:
            return []  # between the two bars: no new drop
        if self.since_ns < 0:
            self.since_ns = end_ns
        self.clocks = [*self.clocks, clock][-KEEP:]
        if math.isfinite(power):
            self.power = [*self.power, power][-KEEP:]
        found = self._judge(steady, end_ns)
        return [found] if found is not None else []

    def _steady(self, clock: float, power: float) -> None:
        self.steady_clocks = [*self.steady_clocks, clock][-STEADY_CLOCKS:]
        if math.isfinite(power):
            self.steady_power = [*self.steady_power, power][-STEADY_CLOCKS:]

    def _judge(self, steady: float, end_ns: int) -> Drift | None:
        held_s = (end_ns - self.since_ns) / 1e9
        if self.told or len(self.clocks) < HOLD_WINDOWS or held_s < HOLD_S:
            return None
        drop = 1 - statistics.median(self.clocks) / steady
        before = [c for t, c in self.compute if t < self.since_ns]
        after = [c for t, c in self.compute if t >= self.since_ns]
        if drop < CLOCK_DROP or len(after) < HOLD_WINDOWS // 2 or not before:
            return None
        shift = statistics.median(after) / statistics.median(before) - 1
        if shift < COST_SHARE * drop or self._working_harder():
            return None
        self.told = True
        return Drift(-1, shift, drop, len(after), self.since_ns)

    def _working_harder(self) -> bool:
        if not self.steady_power or not self.power:
            return False
        return statistics.median(self.power) > (1 + POWER_RISE) * statistics.median(
            self.steady_power
        )
