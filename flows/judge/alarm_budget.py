"""A false-alarm budget that holds on any fleet: each trigger's bar learned from its statistic's
own distribution on this fleet, online.

A fixed bar (a part named at compound score 3, a straggler at 15% over its peers) is fitted to
one background. A real fleet has its own: MoE experts that make a different rank slow every
step, noisy ports, GPUs binned 8% apart. So every trigger that can blame hardware also keeps
the distribution of the very statistic it compares with its bar, over every entity it looks
at, window after window (:class:`TailEstimate`), and raises its bar to the tail that the
configured budget allows: ``budget`` false events per 1,000 node-hours, spread over the
samples a window gives (one per GPU, port or host; one per rank and step).

Such small tail probabilities (1e-7 and below) lie beyond any sample, so the tail is
extrapolated the way extreme-value theory does (peaks over a threshold): over the 99th
percentile ``u``, the excesses are taken as exponential with the scale ``beta`` of their
median, and the bar for a tail probability ``alpha`` is ``u + beta * ln(0.01 / alpha)``.
Until ``MIN_SAMPLES`` samples are in, or where the fleet's tail is lighter than the prior
assumes, the bar is the prior: the fixed rule, which is conservative. The learned bar never
goes below it.

>>> import numpy as np
>>> budget = AlarmBudget()
>>> rng = np.random.default_rng(7)
>>> round(budget.bar("score|nic", 3.0, samples_per_window=512, nodes=64, window_s=10.0), 2)
3.0
>>> for _ in range(40):  # a quiet fleet: scores near zero
...     budget.observe("score|nic", rng.exponential(0.05, 512))
>>> round(budget.bar("score|nic", 3.0, samples_per_window=512, nodes=64, window_s=10.0), 2)
3.0
>>> for _ in range(40):  # a noisy one: a heavy tail of port scores
...     budget.observe("score|nic", rng.exponential(0.8, 512))
>>> budget.bar("score|nic", 3.0, samples_per_window=512, nodes=64, window_s=10.0) > 6
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from reflex_localize.flows.state_upgrade import FieldsFilledOnRestore

# Log-spaced bins from 1e-4 to 1e4 (ten a decade): a statistic's value is known to 26%.
_EDGES = np.logspace(-4, 4, 81)
_CENTERS = np.sqrt(_EDGES[:-1] * _EDGES[1:])
MIN_SAMPLES = 20_000  # before this many, the prior bar holds
TAIL_LEVEL = 0.99  # the threshold over which excesses are modelled
# Samples forget with this weight a window: a week of 10 s windows keeps about a third.
FORGET = 1.0 - 1.0 / 60_000
DEFAULT_BUDGET = 0.5  # false events per 1,000 node-hours


@dataclass
class TailEstimate(FieldsFilledOnRestore):
    """The distribution of one non-negative statistic, as counts in log-spaced bins (values
    below the first bin count in it), with slow forgetting. Bounded memory, picklable."""

    counts: np.ndarray = field(default_factory=lambda: np.zeros(len(_CENTERS)))
    samples: float = 0.0

    def add(self, values: np.ndarray) -> None:
        finite = values[np.isfinite(values)]
        self.counts *= FORGET
        self.samples *= FORGET
        if not len(finite):
            return
        where = np.clip(np.searchsorted(_EDGES, finite, side="right") - 1, 0, len(_CENTERS) - 1)
        self.counts += np.bincount(where, minlength=len(_CENTERS))
        self.samples += len(finite)

    def quantile_bar(self, alpha: float) -> float | None:
        """The value exceeded with probability ``alpha`` (peaks over threshold); None while
        too few samples are in, or when nothing lies over the 99th percentile."""
        if self.samples < MIN_SAMPLES or alpha <= 0:
            return None
        cumulative = np.cumsum(self.counts) / self.counts.sum()
        top = int(np.searchsorted(cumulative, TAIL_LEVEL))
        if top >= len(_CENTERS) - 1:
            return None
        u = float(_EDGES[top + 1])
        over = self.counts[top + 1 :]
        if over.sum() <= 0:
            return u
        middle = int(np.searchsorted(np.cumsum(over) / over.sum(), 0.5))
        beta = (float(_CENTERS[top + 1 + middle]) - u) / math.log(2.0)
        if alpha >= 1 - TAIL_LEVEL:
            return u
        return u + max(beta, 0.0) * math.log((1 - TAIL_LEVEL) / alpha)


@dataclass
class AlarmBudget(FieldsFilledOnRestore):
    """Per trigger statistic (``trigger|kind``): its tail on this fleet, and the bar that a
    budget of false events per 1,000 node-hours allows."""

    tails: dict[str, TailEstimate] = field(default_factory=dict)

    def observe(self, statistic: str, values: np.ndarray) -> None:
        """One window's (or step's) values of a statistic, one per entity looked at."""
        if statistic not in self.tails:
            self.tails[statistic] = TailEstimate()
        self.tails[statistic].add(np.asarray(values, dtype=float))

    def bar(
        self,
        statistic: str,
        prior: float,
        *,
        budget: float = DEFAULT_BUDGET,
        samples_per_window: float,
        nodes: int,
        window_s: float,
    ) -> float:
        """The bar a trigger's statistic must pass: the prior, raised to the tail the budget
        allows once the fleet's own history is in. ``samples_per_window``: how many values
        the statistic takes a window (each one a chance of a false event)."""
        allowed = budget / 1000 * max(nodes, 1) * window_s / 3600  # events a window
        alpha = allowed / max(samples_per_window, 1.0)
        tail = self.tails.get(statistic)
        learned = None if tail is None else tail.quantile_bar(alpha)
        return prior if learned is None else max(prior, learned)
