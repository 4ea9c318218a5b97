"""Ranks judged against their role peers step by step: stragglers from launch, and the shape
of a job's step time (a slow pipeline stage, steps that follow the data).

Windows are the flow's clock, but training steps are the job's: a step may last 2 s or 47 s.
So each step is judged once, when every rank has reported it (or a later step shows that a
missing rank will not), and evidence accrues per step, whatever the ratio of step length to
window. A rank slow for ``streak_steps`` steps in a row is a straggler in its own right: the
job needs no history of its own, which a job slow from its first step does not have.

Peers share a pipeline stage and a GPU model. Groups may be small (two data-parallel ranks
per stage), so a rank is not compared with a median that it dominates: each group's level is
the median of its faster half, and each rank's ratio to its group's level is judged against
the spread of those ratios over the whole job (after removing every stage's level), floored
at ``min_spread`` (a few percent is noise). A group of one has no peer and is not judged.

>>> from reflex_localize.flows.messages import RankInfo
>>> members = {r: RankInfo(r, f"n{r // 2}", r % 2, r // 2, r % 2, 0, 2, "h100") for r in range(8)}
>>> peers = StepPeers()
>>> findings = []
>>> for step in range(4):  # rank 5 computes 45 s where its stage peers take 20 s
...     compute = {r: 45.0 if r == 5 else 20.0 + 0.1 * r for r in members}
...     peers.add_step(step, compute, 10**18 + step * 47 * 10**9)
...     findings += peers.judge(members)
>>> [(f.kind, f.rank, round(f.ratio, 2), f.steps) for f in findings]
[('straggler', 5, 2.23, 3)]
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from reflex_localize.flows.judge.rank_drift import RankDrift
from reflex_localize.flows.messages import RankInfo
from reflex_localize.flows.state_upgrade import FieldsFilledOnRestore

MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class StepFinding:
    """What the per-step view found: a straggling rank, or the pattern of the job's steps."""

    kind: str  # straggler | marginal | drift | carried_drift | stage | data | loss_divergence
    rank: int = -1
    ratio: float = 0.0  # the rank's (or stage's) compute over its peers'
    z: float = 0.0  # (a drift: how far its GPU's clock fell below its own)
    steps: int = 0  # consecutive steps it held for
    since_ns: int = 0
    stage: int = -1
    at_step: int = -1  # the step it was seen at (a loss divergence)


def role_ratios(
    values: np.ndarray, groups: np.ndarray | Sequence[Hashable], min_spread: float
) -> tuple[np.ndarray, np.ndarray]:
    """Each value over its group's level (the median of the group's faster half), and how far
    that ratio stands out, in robust spreads of all the ratios (NaN for a group of one)."""
    ratio = np.full(len(values), np.nan)
    members: dict[object, list[int]] = {}
    listed_groups = groups.tolist() if isinstance(groups, np.ndarray) else groups
    for row, group in enumerate(listed_groups):
        members.setdefault(group, []).append(row)
    listed = values.tolist()
    for rows in members.values():
        if len(rows) < 2:
            continue
        level = _faster_half([listed[row] for row in rows])
        if level > 0:
            ratio[rows] = values[rows] / level
    judged = ratio[np.isfinite(ratio)]
    if not len(judged):
        return ratio, np.full(len(values), np.nan)
    center = _median(judged.tolist())
    spread = MAD_TO_SIGMA * _median(np.abs(judged - center).tolist())
    return ratio, (ratio - 1.0) / max(spread, min_spread)


def _faster_half(values: list[float]) -> float:
    """The median of the faster half: the level of a group up to half of which is slow."""
    ordered = sorted(values)
    return _median(ordered[: (len(ordered) + 1) // 2])


def _median(values: list[float]) -> float:
    """The median exactly as ``np.median`` gives it (the mean of the middle two of an even
    count), without its 15 us a call: the groups here are small and judged every step."""
    if not values:
        return math.nan
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return float((ordered[middle - 1] + ordered[middle]) / 2)


@dataclass
class StepPeers(FieldsFilledOnRestore):
    """Per job: compute time per rank and step, judged per step. See the module docstring."""

    streak_steps: int = 3
    min_excess: float = 0.15  # slower than its peers by at least this much...
    clear_excess: float = 0.25  # ...told after streak_steps when this much (else 3x as many)
    z_needed: float = 4.0  # ...and standing out from the job's spread by this many spreads
    # ...and held this long (from its first slow step's end), whatever the step length: in a
    # job of 2 s steps, three steps are 6 s, and two overlapping few-second thermal throttles
    # on one GPU (routine on a fleet) slow its rank 26% for as long. Three 8 s steps span 16 s.
    min_hold_s: float = 15.0
    min_spread: float = 0.02
    stage_excess: float = 0.15  # a stage this much slower than the others on all its ranks
    data_spread: float = 0.15  # step-to-step spread of the job's compute that says "the data"
    pattern_steps: int = 4  # steps judged before the job's pattern is told (and re-told)
    max_pending: int = 8  # steps kept waiting for a late rank (bounded memory)
    pending: dict[int, dict[int, float]] = field(default_factory=dict)  # step -> rank -> compute
    stamps: dict[int, int] = field(default_factory=dict)  # step -> when it ended (ns)
    streak: dict[int, int] = field(default_factory=dict)
    since: dict[int, int] = field(default_factory=dict)
    reported: set[int] = field(default_factory=set)
    was_normal: set[int] = field(default_factory=set)  # ranks seen keeping up with peers
    judged: int = 0
    stage_levels: list[dict[int, float]] = field(default_factory=list)  # recent steps
    # Recent steps: the ranks well above their peers (2 x min_excess) and their ratios.
    rank_ratios: list[dict[int, float]] = field(default_factory=list)
    told: tuple = ()  # the pattern last told
    # Pattern looks at which the job's stages ran even (none half stage_excess above the
    # others): a stage uneven from the first look is partitioning at once; one that falls
    # behind after the job ran even waits for its node's cause (JobTriggers._waiting_stage).
    even_looks: int = 0
    # Ranks on a GPU with a record from earlier jobs (flows/incidents/node_memory.py): told
    # after one step less, even when marginal, even from the job's first step.
    quick: set[int] = field(default_factory=set)
    # A rank a little slower than its peers (marginal_excess up) over its latest
    # marginal_steps steps, from the job's first step or not: not a straggler by itself (a
    # quirk of its part looks the same), but the job step tells it when a part of its node
    # explains it (flows/judge/explained_straggler.py). Noise may dip one step under half the
    # excess.
    marginal_excess: float = 0.05
    marginal_z: float = 1.0
    marginal_steps: int = 9
    marginal_recent: dict[int, list[tuple[float, float, int]]] = field(
        default_factory=dict
    )  # rank -> (ratio, z, step end) of its latest judged steps
    marginal_told: set[int] = field(default_factory=set)  # told while they stay marginal
    # The straggler rule's statistic, each rank's least excess over its latest streak_steps
    # steps, for the alarm budget to learn this fleet's tail from; and the bar it raised
    # min_excess and clear_excess to (0: the prior holds).
    budget_samples: list[float] = field(default_factory=list)
    learned_excess: float = 0.0
    # Each rank against its own history (flows/judge/rank_drift.py): what peers cannot see.
    drift: RankDrift = field(default_factory=RankDrift)

    def add_step(self, step: int, compute: dict[int, float], time_ns: int) -> None:
        """Compute seconds of some ranks for one step (NaN where the framework gave none)."""
        known = {r: v for r, v in compute.items() if math.isfinite(v) and v > 0}
        if known:
            self.pending.setdefault(step, {}).update(known)
            self.stamps[step] = max(self.stamps.get(step, 0), time_ns)

    def ran_even(self) -> bool:
        """The job's stages ran even for a pattern's look before (see even_looks)."""
        return self.even_looks >= self.pattern_steps

    def judge(self, members: dict[int, RankInfo]) -> list[StepFinding]:
        """Judges every step that is complete (or that a later step closed); returns the
        findings: a straggler when its streak reaches ``streak_steps``, and the job's step
        pattern once ``pattern_steps`` steps are judged (again when it changes)."""
        findings: list[StepFinding] = []
        if not members:
            return findings
        newest = max(self.pending, default=-1)
        for step in sorted(self.pending):
            ready = len(self.pending[step]) >= len(members) or step < newest - 1
            if not ready and len(self.pending) <= self.max_pending:
                break
            findings += self._judge_step(self.pending.pop(step), self.stamps.pop(step), members)
        return findings

    def _judge_step(
        self, compute: dict[int, float], time_ns: int, members: dict[int, RankInfo]
    ) -> list[StepFinding]:
        ranks = [r for r in sorted(compute) if r in members]
        if len(ranks) < 2:
            return []
        values = np.array([compute[r] for r in ranks])
        stages = np.array([members[r].pp_rank for r in ranks])
        # (stage, profile) pairs: the same groups as the "stage|profile" strings, unspelled.
        groups = [(members[r].pp_rank, members[r].profile) for r in ranks]
        ratio, z = role_ratios(values, groups, self.min_spread)
        self.judged += 1
        ratios, zs = ratio.tolist(), z.tolist()
        self._judge_marginal(ranks, ratios, zs, time_ns)
        self._sample_streaks(ranks)
        findings = self._judge_slow(ranks, ratios, zs, time_ns)
        self._remember(ranks, values, stages, ratio)
        level = _faster_half(values.tolist())  # the job's: the data and a slow stage cancel
        if level > 0:
            own = dict(zip(ranks, (values / level).tolist(), strict=True))
            findings += [
                StepFinding(
                    "carried_drift" if d.past_job else "drift",
                    d.rank,
                    1 + d.shift,
                    d.clock_drop,
                    d.steps,
                    d.since_ns,
                )
                for d in self.drift.observe_step(own, time_ns)
            ]
        pattern = self._pattern(members)
        if pattern is not None and pattern[:2] != self.told[:2]:
            self.told = pattern
            findings.append(pattern[2])
        return findings

    def _judge_slow(
        self, ranks: list[int], ratios: list[float], zs: list[float], time_ns: int
    ) -> list[StepFinding]:
        """Each rank slow against its peers this step or not: its streak grows or ends, and a
        streak long and clear enough is told as a straggler."""
        # A part with a record is suspected at half the excess (flows/incidents/node_memory.py).
        bar = max(self.min_excess, self.learned_excess)
        slow_at, quick_slow_at = 1 + bar, 1 + bar / 2
        keeping_up: list[int] = []
        findings = []
        for rank, r, zz in zip(ranks, ratios, zs, strict=True):
            at = quick_slow_at if rank in self.quick else slow_at
            if not (math.isfinite(r) and r >= at and zz >= self.z_needed):
                keeping_up.append(rank)
                continue
            self.streak[rank] = self.streak.get(rank, 0) + 1
            since = self.since.setdefault(rank, time_ns)
            # A marginal slowdown must hold three times as long before it is told (noise and a
            # neighbour's trouble push a healthy rank 10-20% over for a step or two), and must
            # have begun during the job: a part a little slow since the job's first step is
            # as likely a quirk of that part as a fault, and only a clear one is told then.
            clear = r >= 1 + max(self.clear_excess, self.learned_excess)
            known = rank in self.quick
            needed = self.streak_steps - 1 if known else self.streak_steps * (1 if clear else 3)
            told = clear or rank in self.was_normal or known
            # A part with a record is told on its lowered bar: the record says it is no blip.
            held = known or time_ns - since >= self.min_hold_s * 1e9
            if self.streak[rank] >= needed and told and held and rank not in self.reported:
                self.reported.add(rank)
                findings.append(
                    StepFinding("straggler", rank, float(r), float(zz), self.streak[rank], since)
                )
        self._keeping_up(keeping_up)
        return findings

    def _keeping_up(self, ranks: list[int]) -> None:
        """Ranks not slow this step: seen keeping up, their streaks (and reports) over. Most
        ranks, every step: done in bulk, the dicts walked only when they hold anything."""
        self.was_normal.update(ranks)
        self.reported.difference_update(ranks)
        for counts in (self.streak, self.since):
            if counts:
                for rank in ranks:
                    counts.pop(rank, None)

    def _sample_streaks(self, ranks: list[int]) -> None:
        """Each rank's least excess over its latest streak_steps steps: what a straggler must
        hold, step after step, for the alarm budget (flows/judge/alarm_budget.py)."""
        steps, samples = self.streak_steps, self.budget_samples
        for rank in ranks:
            kept = self.marginal_recent[rank][-steps:]
            if len(kept) == steps:
                recent = [r for r, _, _ in kept]
                if all(map(math.isfinite, recent)):
                    samples.append(max(min(recent) - 1.0, 0.0))

    def _judge_marginal(
        self, ranks: list[int], ratios: list[float], zs: list[float], time_ns: int
    ) -> None:
        """Keeps each rank's latest marginal_steps steps; a rank told as marginal and now back
        with its peers may be told again."""
        start, back_below = 1 - self.marginal_steps, 1 + self.marginal_excess / 2
        for rank, ratio, z in zip(ranks, ratios, zs, strict=True):
            kept = self.marginal_recent.setdefault(rank, [])
            del kept[:start]  # what kept[start:] keeps, in place: one list per rank, not a step
            kept.append((ratio, z, time_ns))
            if rank not in self.marginal_told:  # nothing to take back: leave the median be
                continue
            recent = [r for r, _, _ in kept if math.isfinite(r)]
            if len(recent) >= self.marginal_steps and _median(recent) < back_below:
                self.marginal_told.discard(rank)  # back with its peers: a new streak is news

    def _is_marginal(self, rank: int, steps: int) -> bool:
        kept = self.marginal_recent.get(rank, [])[-steps:]
        # Most ranks keep up with their peers: their latest step settles it, lists unbuilt.
        if len(kept) < steps or not kept[-1][0] >= 1 + self.marginal_excess / 2:
            return False
        recent = [(r, z) for r, z, _ in kept if math.isfinite(r)]
        if len(recent) < steps:
            return False
        ratios = [r for r, _ in recent]
        above_half = sum(r >= 1 + self.marginal_excess / 2 for r in ratios)
        return (
            above_half >= len(ratios) - 1
            and _median(ratios) >= 1 + self.marginal_excess
            and _median([z for _, z in recent]) >= self.marginal_z
        )

    def marginal(self) -> list[StepFinding]:
        """Ranks marginally slower than their peers over their latest marginal_steps steps,
        not told as stragglers nor told since they became so, each with its median ratio."""
        return self._marginal(self.marginal_recent, self.marginal_steps)

    def marginal_known(self) -> list[StepFinding]:
        """The ranks on a part with a record (``quick``) marginally slower over their latest
        streak_steps steps: a part that failed before and slows its rank again is not a quirk
        to wait out for nine steps (flows/incidents/returning_part.py)."""
        known = {r: kept for r, kept in self.marginal_recent.items() if r in self.quick}
        return self._marginal(known, self.streak_steps)

    def _marginal(
        self, recent_of: dict[int, list[tuple[float, float, int]]], steps: int
    ) -> list[StepFinding]:
        return [
            StepFinding(
                "marginal",
                rank,
                _median([r for r, _, _ in kept[-steps:]]),
                steps=steps,
                since_ns=kept[-steps][2],
            )
            for rank, kept in sorted(recent_of.items())
            if rank not in self.reported
            and rank not in self.marginal_told
            and self._is_marginal(rank, steps)
        ]

    def _remember(
        self, ranks: list[int], values: np.ndarray, stages: np.ndarray, ratio: np.ndarray
    ) -> None:
        # Each stage's level from its faster half: a sick node's ranks, up to half of a stage,
        # must not pass for the whole stage (or the job) moving with the data.
        by_stage: dict[int, list[float]] = {}
        for stage, value in zip(stages.tolist(), values.tolist(), strict=True):
            by_stage.setdefault(int(stage), []).append(value)
        levels = {stage: _faster_half(by_stage[stage]) for stage in sorted(by_stage)}
        self.stage_levels = [*self.stage_levels, levels][-2 * self.pattern_steps :]
        well_above = np.flatnonzero(np.isfinite(ratio) & (ratio >= 1 + 2 * self.min_excess))
        ratios = {ranks[i]: float(ratio[i]) for i in well_above.tolist()}
        self.rank_ratios = [*self.rank_ratios, ratios][-2 * self.pattern_steps :]

    def _slowest_rotates(self, members: dict[int, RankInfo]) -> bool:
        """Ranks well above their peers in some steps, a different one each time, on
        different nodes: per-rank data (sequence lengths). A slow rank would be slow step
        after step, and a sick node's ranks all sit on that node."""
        recent = self.rank_ratios[-2 * self.pattern_steps :]
        slow = Counter(rank for ratios in recent for rank in ratios)
        if len(slow) < 2 or max(slow.values()) > len(recent) // 2:
            return False
        # The data is there every step; a benign episode (a busy host, a congested port) now
        # and then on one node or another is not.
        steps_with_slow = sum(bool(ratios) for ratios in recent)
        if steps_with_slow < 0.75 * len(recent):
            return False
        nodes = Counter(members[r].node if r in members else "" for r in slow.elements())
        return len(nodes) >= 2 and max(nodes.values()) <= sum(nodes.values()) // 2

    def _pattern(self, members: dict[int, RankInfo]) -> tuple[str, int, StepFinding] | None:
        """The job's step pattern over its recent steps: one stage slower on all its ranks
        (partitioning), or every rank's compute moving with the data; None when neither."""
        recent = self.stage_levels[-self.pattern_steps :]
        if self.judged < self.pattern_steps or len(recent) < self.pattern_steps:
            return None
        if self.reported:  # a straggler explains the step time; it was told as such
            return None
        stages = sorted(set.intersection(*(set(levels) for levels in recent)))
        if len(stages) >= 2:
            level = {s: _median([levels[s] for levels in recent]) for s in stages}
            worst = max(stages, key=lambda s: level[s])
            others = _median([level[s] for s in stages if s != worst])
            excess = level[worst] / others - 1 if others > 0 else 0.0
            if excess >= self.stage_excess:
                finding = StepFinding("stage", ratio=1 + excess, steps=len(recent), stage=worst)
                return ("stage", worst, finding)
            if excess < self.stage_excess / 2:
                self.even_looks += 1
        # "The data" needs a longer look than a stage: one congestion episode or checkpoint
        # moves a step or two, not eight.
        longer = self.stage_levels[-2 * self.pattern_steps :]
        totals = np.array([_median(list(levels.values())) for levels in longer])
        spread = float(np.std(totals) / np.mean(totals)) if totals.mean() > 0 else 0.0
        if len(longer) < 2 * self.pattern_steps:
            return None
        if _level_shift(totals, self.data_spread):
            return None  # every rank slower from one step on: a regression's, not the data's
        # The data moves the steps all along: a spread only one half of the look shows is the
        # first steps of a change (one slow step after seven even ones), not the data.
        half = len(totals) // 2
        steady = min(_spread(totals[:half]), _spread(totals[half:]))
        varies = spread >= self.data_spread and steady >= self.data_spread / 2
        if varies or self._slowest_rotates(members):
            finding = StepFinding("data", ratio=1 + spread, steps=len(recent))
            return ("data", -1, finding)
        return None


def _spread(totals: np.ndarray) -> float:
    """Step-to-step spread relative to the level (0 for fewer than two steps)."""
    mean = float(totals.mean()) if len(totals) >= 2 else 0.0
    return float(np.std(totals)) / mean if mean > 0 else 0.0


def _level_shift(totals: np.ndarray, least: float) -> bool:
    """The job's compute moved from one level to another within the look (its two halves'
    medians ``least`` / 2 apart, more than twice either half's own spread): a step change
    (a power brake, a larger batch) that the job's regression judges, not step-to-step
    variation that follows the data.

    >>> _level_shift(np.array([1.0, 1.01, 0.99, 1.0, 1.6, 1.62, 1.59, 1.6]), 0.15)
    True
    >>> _level_shift(np.array([1.0, 1.4, 0.8, 1.2, 0.9, 1.5, 1.0, 1.3]), 0.15)
    False
    """
    half = len(totals) // 2
    first, second = totals[:half], totals[half:]
    if half < 2 or first.mean() <= 0 or second.mean() <= 0:
        return False
    shift = abs(float(np.median(second) / np.median(first)) - 1)
    within = max(float(np.std(first) / first.mean()), float(np.std(second) / second.mean()))
    return shift >= least / 2 and shift > 2 * within
