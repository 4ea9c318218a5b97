"""Detectors, river style: ``learn_many`` / ``score_many`` on numpy arrays, higher = worse.

* :class:`LongitudinalBaseline`: each entity × signal against its own history (temporal).
* :func:`peer_deviation`: each entity against its peers of the same window (spatial).
* :class:`CompoundScore`: weighted evidence that decays and accumulates per entity.

Scores are signed deviations in units of robust spread; ``NaN`` means "still warming up"
(river returns ``None``; an array needs a float).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from reflex_localize.flows.signals.derive import factorize

MAD_TO_SIGMA = 1.4826
MIN_PEERS = 4  # fewer rows than this in a peer group: too few peers to judge


@dataclass
class LongitudinalBaseline:
    """Exponentially weighted mean and variance per (entity, signal), mergeable and robust.

    * Robust: once warm, a value is clipped to ``center ± clip·scale`` before it is learned,
      and values deviating by more than ``protect`` spreads are not learned at all, so an
      anomaly cannot drag the baseline it is scored against (river's ``anomaly/filter.py``).
    * Longitudinal: the effective memory is ``horizon`` windows, so a node's baseline lives
      across jobs and drifts slowly, but a sudden change stands out.
    * Mergeable: :meth:`merge` combines two baselines' statistics (Chan et al.), the way peer
      baselines are pooled.

    >>> import numpy as np
    >>> b = LongitudinalBaseline(n_signals=1, floors=np.array([1.0]), warmup=3)
    >>> for v in (60.0, 61.0, 60.5, 60.2):
    ...     b.learn_many(np.array(["n1|gpu|0"], dtype=object), np.array([[v]]))
    >>> float(b.score_many(np.array(["n1|gpu|0"], dtype=object), np.array([[70.0]]))[0, 0]) > 5
    True
    """

    n_signals: int
    floors: np.ndarray
    warmup: int = 12
    horizon: int = 360
    clip: float = 3.0
    protect: float = 6.0
    index: dict[str, int] = field(default_factory=dict)
    count: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    mean: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    var: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def __post_init__(self) -> None:
        if self.count.shape[1:] != (self.n_signals,):
            shape = (0, self.n_signals)
            self.count, self.mean, self.var = np.zeros(shape), np.zeros(shape), np.zeros(shape)

    def rows(self, entities: np.ndarray, *, create: bool) -> np.ndarray:
        """Row of each entity in the state arrays; -1 for unknown ones when not creating."""
        rows = np.empty(len(entities), dtype=np.int64)
        new = 0
        for i, key in enumerate(entities.tolist()):
            row = self.index.get(key)
            if row is None:
                if not create:
                    rows[i] = -1
                    continue
                row = self.index[key] = len(self.index)
                new += 1
            rows[i] = row
        if new:
            grow = np.zeros((new, self.n_signals))
            self.count = np.vstack([self.count, grow])
            self.mean = np.vstack([self.mean, grow])
            self.var = np.vstack([self.var, grow])
        return rows

    def scale(self, rows: np.ndarray) -> np.ndarray:
        return np.maximum(np.sqrt(self.var[rows]), self.floors)

    def score_many(self, entities: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Signed deviation ``(x - center) / scale``; NaN while warming up or unknown."""
        rows = self.rows(entities, create=False)
        out = np.full(values.shape, np.nan)
        known = rows >= 0
        if known.any():
            r = rows[known]
            z = (values[known] - self.mean[r]) / self.scale(r)
            z[self.count[r] < self.warmup] = np.nan
            out[known] = z
        return out

    def learn_many(self, entities: np.ndarray, values: np.ndarray) -> None:
        rows = self.rows(entities, create=True)
        x = values.copy()
        present = np.isfinite(x)
        count, mean = self.count[rows], self.mean[rows]
        warm = count >= self.warmup
        scale = self.scale(rows)
        deviation = np.abs(x - mean) / scale
        learn = present & ~(warm & (deviation > self.protect))
        x = np.where(warm, np.clip(x, mean - self.clip * scale, mean + self.clip * scale), x)
        new_count = np.where(learn, count + 1, count)
        alpha = np.where(learn, 1.0 / np.minimum(new_count, self.horizon).clip(min=1), 0.0)
        delta = np.where(learn, x - mean, 0.0)
        new_mean = mean + alpha * delta
        new_var = (1 - alpha) * (self.var[rows] + alpha * delta * delta)
        self.count[rows], self.mean[rows], self.var[rows] = new_count, new_mean, new_var

    def merge(self, other: LongitudinalBaseline) -> LongitudinalBaseline:
        """A baseline holding both histories: per entity, Chan's parallel mean/variance."""
        merged = LongitudinalBaseline(
            self.n_signals, self.floors, self.warmup, self.horizon, self.clip, self.protect
        )
        for source in (self, other):
            keys = np.array(list(source.index), dtype=object)
            if not len(keys):
                continue
            rows = merged.rows(keys, create=True)
            src = np.fromiter(source.index.values(), dtype=np.int64, count=len(keys))
            n_a, n_b = merged.count[rows], source.count[src]
            total = n_a + n_b
            safe = np.where(total > 0, total, 1)
            delta = source.mean[src] - merged.mean[rows]
            merged.mean[rows] = merged.mean[rows] + delta * n_b / safe
            merged.var[rows] = (
                merged.var[rows] * n_a + source.var[src] * n_b + delta * delta * n_a * n_b / safe
            ) / safe
            merged.count[rows] = total
        return merged

    def state(self) -> tuple:
        """A compact, immutable copy for Bytewax snapshots."""
        return (dict(self.index), self.count.copy(), self.mean.copy(), self.var.copy())

    @classmethod
    def from_state(cls, state: tuple, floors: np.ndarray, **kwargs: int) -> LongitudinalBaseline:
        index, count, mean, var = state
        return cls(
            len(floors),
            floors,
            index=dict(index),
            count=count.copy(),
            mean=mean.copy(),
            var=var.copy(),
            **kwargs,
        )


def peer_deviation(
    values: np.ndarray,
    groups: np.ndarray,
    floors: np.ndarray,
    pooled_scale: np.ndarray | None = None,
    min_peers: int = MIN_PEERS,
) -> np.ndarray:
    """Signed deviation of each row from the median of its peer group, per signal column.

    The spread is the larger of the group's MAD, the pooled longitudinal spread of its members
    (so a quiet group does not turn a tiny wobble into a huge z) and the signal's floor.
    Rows in groups smaller than ``min_peers`` get NaN: too few peers to judge.

    >>> import numpy as np
    >>> v = np.array([[1.0], [1.1], [0.9], [1.0], [5.0]])
    >>> z = peer_deviation(v, np.array(["a"] * 5, dtype=object), np.array([0.1]))
    >>> bool(z[4, 0] > 10 and abs(z[0, 0]) < 1)
    True
    """
    out = np.full(values.shape, np.nan)
    if not len(values):
        return out
    names, inverse = factorize(groups)
    sizes = np.bincount(inverse, minlength=len(names))
    rows = np.flatnonzero(sizes[inverse] >= min_peers)
    if not len(rows):
        return out
    # Every group's medians in one sort, not two small sorts per group (a dozen groups a
    # window, each sort's numpy overhead more than its work): see _group_medians. A median
    # is a pick from its column's sorted values, the same floats whichever sort ordered them
    # (zeros of both signs aside: the flow's values, bincount sums and spreads, hold no -0.0).
    which, slot = inverse[rows], _slots(inverse)[rows]
    width = int(sizes[which].max())

    def medians(block: np.ndarray) -> np.ndarray:
        return _group_medians(block, which, slot, len(names), width)[which]

    block = values[rows]
    center = medians(block)
    spread = np.fmax(MAD_TO_SIGMA * medians(np.abs(block - center)), floors)
    if pooled_scale is not None:
        spread = np.fmax(spread, medians(pooled_scale[rows]))
    out[rows] = (block - center) / spread
    return out


def _slots(inverse: np.ndarray) -> np.ndarray:
    """Each row's place among the rows of its group (0, 1, ... in row order)."""
    order = np.argsort(inverse, kind="stable")
    sizes = np.bincount(inverse)
    slot = np.empty(len(inverse), dtype=np.int64)
    slot[order] = np.arange(len(inverse)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return slot


def _group_medians(
    block: np.ndarray, which: np.ndarray, slot: np.ndarray, n_groups: int, width: int
) -> np.ndarray:
    """:func:`nan_median` of each group's rows of ``block`` (row i is in group ``which[i]``, at
    ``slot[i]``), as a (group, column) array. The groups are laid side by side and padded with
    NaN, which sorts last and is not counted: each column's values sort to the order they
    have alone, and the median takes the same one or two of them."""
    padded = np.full((n_groups, width, block.shape[1]), np.nan, dtype=block.dtype)
    padded[which, slot] = block
    ordered = np.sort(padded, axis=1)
    count = (~np.isnan(padded)).sum(axis=1)
    low = np.maximum((count - 1) // 2, 0)[:, None, :]
    high = (count // 2)[:, None, :]
    with np.errstate(invalid="ignore"):
        pair = np.take_along_axis(ordered, low, axis=1) + np.take_along_axis(ordered, high, axis=1)
        median = pair[:, 0, :] / 2
    return np.where(count > 0, median, np.nan)


def nan_median(block: np.ndarray) -> np.ndarray:
    """Column medians ignoring NaN (NaN where a column has no value). ``np.nanmedian`` goes
    through masked arrays for small inputs, which made it the flow's hottest call."""
    ordered = np.sort(block, axis=0)  # NaN sorts last
    count = (~np.isnan(block)).sum(axis=0)
    low = np.clip((count - 1) // 2, 0, None)
    high = np.clip(count // 2, 0, None)
    columns = np.arange(block.shape[1])
    with np.errstate(invalid="ignore"):
        median = (ordered[low, columns] + ordered[high, columns]) / 2
    return np.where(count > 0, median, np.nan)


def evidence_strength(
    deviation: np.ndarray, onset: float = 3.0, span: float = 3.0, cap: float = 3.0
) -> np.ndarray:
    """0 below ``onset`` spreads, rising linearly, capped: small wobbles are no evidence."""
    return np.clip((np.nan_to_num(deviation, nan=0.0) - onset) / span, 0.0, cap)


@dataclass
class CompoundScore:
    """Per-entity score: ``score = decay * score + sum(weight * evidence)``.

    Individually benign anomalies that pile up on one entity, or persist, raise its score
    well above what any single one would; isolated blips decay away.

    >>> import numpy as np
    >>> c = CompoundScore(decay=0.5)
    >>> e = np.array(["n1|gpu|0"], dtype=object)
    >>> [round(float(c.update(e, np.array([1.0]))[0]), 2) for _ in range(3)]
    [1.0, 1.5, 1.75]
    """

    decay: float = 0.85
    scores: dict[str, float] = field(default_factory=dict)

    def update(self, entities: np.ndarray, evidence: np.ndarray) -> np.ndarray:
        """Decays every known entity, adds this window's evidence, returns the given ones."""
        for key in self.scores:
            self.scores[key] *= self.decay
        out = np.empty(len(entities))
        for i, (key, amount) in enumerate(zip(entities.tolist(), evidence.tolist(), strict=True)):
            out[i] = self.scores[key] = self.scores.get(key, 0.0) + amount
        # Forget entities whose score decayed to nothing: memory stays bounded by activity.
        self.scores = {k: v for k, v in self.scores.items() if v > 1e-3}
        return out

    def get(self, key: str) -> float:
        return self.scores.get(key, 0.0)
