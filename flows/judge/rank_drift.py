"""A rank drifting slower than its own history, its GPU's clock with it: a silent fail-slow.

Peers cannot see a GPU that drifts 2-3% slow into the band the fleet's binned GPUs already
occupy (healthy GPUs of one SKU differ by 8%, Sinha et al., SC22): it is one more slow part
among many. Its own history can. So beside the relative view (a rank against its stage peers,
:mod:`flows.step_peers`) each rank keeps an individual one, as NVIDIA's straggler detection
does (a rank against its own history, nvidia-resiliency-ext): its compute time over the job's
level (the median of the faster half of all ranks, so the data and a slow stage cancel), step
by step, under a CUSUM change-point detector (:class:`flows.triggers.StepRegression`: its
scale is the rank's own step-to-step spread, 2-3% from the batches).

A rank whose GPU came into this job already slow has no change point to find. Its GPU's clock
in the last job it served does (:mod:`flows.busy_clocks`): a drift is told as well when, over
``HOLD_STEPS`` steps and ``HOLD_S`` seconds of this job, the GPU's clock without any clock
reason sits ``CARRIED_DROP`` below what it held there, more than the GPUs of the job's other
nodes with a past dropped (a clock the job sets or its workload moves is the job's), and the
rank computes at least half that much slower than the job's level (a slower clock that costs
the job nothing is not told).

A change point is not yet a drift: a throttle, a busy host, a congested port move a rank for
a few steps. A drift is told when, over at least ``HOLD_STEPS`` steps and ``HOLD_S`` seconds
since the change point, the rank's median ratio stays ``DRIFT_SHIFT`` above what it was, and
its GPU's SM clock, in windows without a throttle reason, is ``CLOCK_DROP`` below its own
median from before: the rank is slower because its GPU runs slower, with nothing logged (a
power or cooling cause). A rank slower with its clock unchanged is left to the other rules.

>>> drift = RankDrift()
>>> for step in range(40):  # rank 1's ratio rises 4% at step 20, its GPU's clock 3% lower
...     after = step >= 20
...     drift.observe_clocks({0: 1950.0, 1: 1892.0 if after else 1950.0}, set())
...     found = drift.observe_step({0: 1.0, 1: 1.04 if after else 1.0}, step * 30 * 10**9)
...     if found:
...         break
>>> [(d.rank, round(d.shift, 2), round(d.clock_drop, 3), step) for d in found]
[(1, 0.04, 0.03, 27)]
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from reflex_localize.flows.judge.busy_clocks import busy_median
from reflex_localize.flows.judge.triggers import StepRegression
from reflex_localize.flows.state_upgrade import FieldsFilledOnRestore

DRIFT_SHIFT = 0.02  # the rank's ratio to the job's level, above its own from before
CLOCK_DROP = 0.01  # its GPU's unthrottled SM clock, below its own median from before
# A throttle, a busy host, a congested port move a rank for a few steps, 10-40 s; a drift
# stays. (With 47 s steps, the change point and the hold took 420 s in memory_matters.)
HOLD_STEPS = 6
HOLD_S = 120.0
RATIO_FLOOR = 0.01  # log units: a rank's ratio to the job's level jitters at least this much
RATIO_WARMUP = 12  # steps before a rank's own level is trusted (windows, for its clock)
STEADY_CLOCKS = 60  # windows of a steady rank's clock kept: its own "before"
KEEP = 48  # ratios and clocks kept since a change point (bounded memory)
MIN_CLOCKS = 3  # unthrottled windows since the change point needed to judge the clock
# Against the last job: a GPU's clock with no reason bit is its allowed clock, steady within
# a few MHz (0.3%) window to window and job to job; binning and heat are the GPU's all along.
CARRIED_DROP = 0.015


@dataclass
class Watched:
    """One rank: its ratio's change-point detector, and what it showed since a change."""

    ratio: StepRegression = field(
        default_factory=lambda: StepRegression(warmup=RATIO_WARMUP, floor=RATIO_FLOOR)
    )
    since_ns: int = -1  # the change point (-1: none open)
    base: float = 0.0  # the ratio's own level when it changed
    ratios: list[float] = field(default_factory=list)
    # The GPU's unthrottled clock in the latest windows while the rank was steady, and since
    # the change point. Medians: a checkpoint's idle windows (600 MHz) must not move them.
    steady_clocks: list[float] = field(default_factory=list)
    clocks: list[float] = field(default_factory=list)
    told: bool = False
    # Only for a rank whose GPU served an earlier job: this job's clocks without any reason,
    # its latest ratios, when it first stepped, and whether its drop against that job holds.
    job_clocks: list[float] = field(default_factory=list)
    drop: float = math.nan  # the busy median of job_clocks below the last job's clock
    recent: list[float] = field(default_factory=list)
    first_ns: int = -1
    carried: bool = False
    carried_told: bool = False


@dataclass(frozen=True)
class Drift:
    rank: int
    shift: float  # the rank's median ratio since the change point, over its own before
    clock_drop: float  # its GPU's unthrottled clock since then, below its own before
    steps: int
    since_ns: int
    past_job: str = ""  # told against the clock its GPU held in this earlier job


@dataclass
class RankDrift(FieldsFilledOnRestore):
    """Per job: every rank's individual view. See the module docstring."""

    ranks: dict[int, Watched] = field(default_factory=dict)
    # Rank -> its GPU's clock in the last job it served, and that job (set at the job's start).
    past: dict[int, tuple[float, str]] = field(default_factory=dict)
    node_of: dict[int, str] = field(default_factory=dict)  # of the ranks with a past
    # Per node, the median drop of the other nodes' GPUs with a past: what the job itself did
    # to every clock (a clock setting, a workload the clock follows), not one part.
    others_drop: dict[str, float] = field(default_factory=dict)

    def observe_clocks(
        self, clocks: dict[int, float], throttled: set[int], reasoned: set[int] | None = None
    ) -> None:
        """One window: the SM clock of each rank's GPU, the ranks whose GPU throttled, and
        those whose GPU had any clock reason (the power cap too; default: the throttled)."""
        for rank, clock in clocks.items():
            if rank in throttled or not math.isfinite(clock) or clock <= 0:
                continue
            watched = self._watched(rank)
            if rank in self.past and rank not in (throttled if reasoned is None else reasoned):
                _keep(watched.job_clocks, clock, STEADY_CLOCKS)
            if watched.since_ns >= 0:
                _keep(watched.clocks, clock, KEEP)
            elif watched.ratio.cusum == 0.0:  # steady: what "before" means
                _keep(watched.steady_clocks, clock, STEADY_CLOCKS)
        if self.past:
            self._job_drops()

    def _job_drops(self) -> None:
        """Each window (not each step: a median per rank): every GPU's drop against its last
        job, and per node what the other nodes' GPUs dropped."""
        per_node: dict[str, list[float]] = {}
        for rank, (past_clock, _) in self.past.items():
            watched = self.ranks.get(rank)
            if watched is None or len(watched.job_clocks) < RATIO_WARMUP or past_clock <= 0:
                continue
            watched.drop = 1 - busy_median(watched.job_clocks) / past_clock
            per_node.setdefault(self.node_of.get(rank, ""), []).append(watched.drop)
        medians = {node: statistics.median(drops) for node, drops in per_node.items()}
        self.others_drop = {}
        for node in medians:
            others = [m for other, m in medians.items() if other != node]
            self.others_drop[node] = statistics.median(others) if others else 0.0

    def observe_step(self, ratios: dict[int, float], time_ns: int) -> list[Drift]:
        """One judged step: each rank's compute over the job's level. Returns the drifts told
        at this step (each rank once, until it is back at its own level)."""
        found = []
        for rank, ratio in ratios.items():
            if not (math.isfinite(ratio) and ratio > 0):
                continue
            watched = self._watched(rank)
            if rank in self.past:
                carried = self._judge_carried(rank, watched, ratio, time_ns)
                if carried is not None:
                    found.append(carried)
            if watched.since_ns < 0:
                level = watched.ratio.level()
                if watched.ratio.update(ratio):
                    watched.since_ns, watched.base = time_ns, level
                    watched.ratios, watched.clocks = [ratio], []
                    watched.ratio.reset()
                continue
            _keep(watched.ratios, ratio, KEEP)
            finding = self._judge(rank, watched, time_ns)
            if finding is not None:
                found.append(finding)
        return found

    def _watched(self, rank: int) -> Watched:
        watched = self.ranks.get(rank)
        if watched is None:
            watched = self.ranks[rank] = Watched()
        return watched

    def shifted(self, rank: int) -> bool:
        """The rank's ratio has held ``DRIFT_SHIFT`` above its own since a change point, or
        its clock below its last job's (with the rank slower for it)."""
        watched = self.ranks.get(rank)
        if watched is not None and watched.carried:
            return True
        if watched is None or watched.since_ns < 0 or len(watched.ratios) < HOLD_STEPS:
            return False
        return statistics.median(watched.ratios) >= (1 + DRIFT_SHIFT) * watched.base > 0

    def _judge(self, rank: int, watched: Watched, time_ns: int) -> Drift | None:
        held_s = (time_ns - watched.since_ns) / 1e9
        if len(watched.ratios) < HOLD_STEPS or held_s < HOLD_S or watched.base <= 0:
            return None
        shift = statistics.median(watched.ratios) / watched.base - 1
        if shift < DRIFT_SHIFT / 2:  # back at its own level: the change was an episode
            watched.since_ns, watched.told = -1, False
            watched.ratios, watched.clocks = [], []
            return None
        if watched.told or watched.carried_told:
            return None
        if shift < DRIFT_SHIFT or len(watched.clocks) < MIN_CLOCKS:
            return None
        if len(watched.steady_clocks) < RATIO_WARMUP:
            return None
        drop = 1 - statistics.median(watched.clocks) / statistics.median(watched.steady_clocks)
        if drop < CLOCK_DROP:
            return None
        watched.told = True
        return Drift(rank, shift, drop, len(watched.ratios), watched.since_ns)

    def _judge_carried(
        self, rank: int, watched: Watched, ratio: float, time_ns: int
    ) -> Drift | None:
        """This job's clock against the last job's: see the module docstring."""
        if watched.first_ns < 0:
            watched.first_ns = time_ns
        _keep(watched.recent, ratio, RATIO_WARMUP)
        past_job = self.past[rank][1]
        held_s = (time_ns - watched.first_ns) / 1e9
        watched.carried = False
        drop = watched.drop
        if len(watched.recent) < HOLD_STEPS or held_s < HOLD_S or not math.isfinite(drop):
            return None
        # Every GPU of the job's other nodes slower too: the job's doing, not this part's.
        own = drop - max(self.others_drop.get(self.node_of.get(rank, ""), 0.0), 0.0)
        slower = statistics.median(watched.recent) - 1
        watched.carried = own >= CARRIED_DROP and slower >= drop / 2
        if not watched.carried or watched.carried_told or watched.told:
            return None
        watched.carried_told = True
        return Drift(rank, slower, drop, len(watched.recent), watched.first_ns, past_job)


def _keep(values: list[float], value: float, most: int) -> None:
    """Appends in place, dropping the oldest past ``most`` (a rank's lists, every step)."""
    values.append(value)
    if len(values) > most:
        del values[0]
