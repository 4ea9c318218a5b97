"""Fitting the compound impact model over rows streamed past it, in memory that does not grow
with them.

A week of a 1,024-GPU fleet is millions of rows; held as Python dicts and then as one design
matrix, the fit peaked at 3.1 GB, and a larger fleet could only refit a day. The model is a
ridge regression with non-negative coefficients, so it depends on the rows only through their
weighted means and cross-products (the Gram matrix of a few dozen columns). Two passes over
the rows suffice: one to count which signals occur (the columns), one to sum the products,
chunk by chunk. The constrained minimum is then solved exactly as a small non-negative least
squares problem (``scipy.optimize.nnls`` on the Gram matrix's Cholesky factor), where
scikit-learn's ``Ridge(positive=True)`` iterated over the whole matrix to a tolerance.

>>> rows = [({"a": 1.0}, 0.02, 1.0), ({"a": 2.0}, 0.04, 1.0), ({}, 0.0, 20.0)]
>>> model = fit_impact_passes(lambda: iter(rows))
>>> model.features, model.provenance["rows"]
(('a',), 22)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from reflex_localize.flows.impact.model import MAX_PAIRS, ImpactModel, clipped_slowdown

# A training row: a rank's anomaly evidence, its slowdown, and how many rank-windows it stands
# for (a window's ranks without any anomaly are kept as one row: flows/impact/rows_log.py).
Row = tuple[dict[str, float], float, float]
RowPasses = Callable[[], Iterable[Row]]  # each call streams the same rows again
ALPHA = 1.0  # the ridge penalty, on the weighted sum of squares (scikit-learn's convention)
CHUNK = 65_536  # rows summed at a time


def fit_impact(
    rows: list[tuple[dict[str, float], float]],
    provenance: dict | None = None,
    weights: list[float] | None = None,
) -> ImpactModel:
    """The model fit to rows in hand. ``weights`` count how many rank-windows a row stands for:
    the rows a flow keeps fold a window's ranks without any anomaly into one row at their mean
    slowdown, which leaves the least-squares fit as it was (flows/impact/rows_log.py)."""
    counts = [1.0] * len(rows) if weights is None else weights
    return fit_impact_passes(
        lambda: ((e, s, w) for (e, s), w in zip(rows, counts, strict=True)), provenance
    )


def fit_impact_passes(passes: RowPasses, provenance: dict | None = None) -> ImpactModel:
    """Non-negative ridge regression of the slowdown on the anomaly indicators and their most
    frequent pairs. Ranks with no anomaly at all anchor the level at no slowdown."""
    seen: Counter[str] = Counter()
    counted = 0.0
    for evidence, _, weight in passes():
        counted += weight
        seen.update(signal for signal, value in evidence.items() if value > 0)
    if round(counted) < 20:
        raise ValueError(f"{round(counted)} training rows: too few to learn from (need 20)")
    singles = sorted(seen)
    frequent = sorted(singles, key=lambda s: (-seen[s], s))[:8]
    pairs = [f"{a}*{b}" for i, a in enumerate(frequent) for b in frequent[i + 1 :]][:MAX_PAIRS]
    if not singles:
        raise ValueError("no anomaly in the training rows: nothing to learn")
    moments = _Moments(len(singles) + len(pairs))
    for chunk in _chunks(passes(), CHUNK):
        x = design([evidence for evidence, _, _ in chunk], singles, pairs)
        y = clipped_slowdown(np.array([slowdown for _, slowdown, _ in chunk]))
        moments.add(x, y, np.array([weight for _, _, weight in chunk]))
    coefficients, intercept, r2 = moments.solve(ALPHA)
    info = {"rows": round(counted), "r2": round(r2, 4), **(provenance or {})}
    return ImpactModel(
        tuple(singles + pairs),
        tuple(round(float(c), 6) for c in coefficients),
        round(intercept, 6),
        info,
    )


def design(evidence: list[dict[str, float]], singles: list[str], pairs: list[str]) -> np.ndarray:
    """The regression's matrix for some rows: each single signal's evidence, then each pair's
    product."""
    column = {name: i for i, name in enumerate(singles)}
    x = np.zeros((len(evidence), len(singles) + len(pairs)))
    for i, row in enumerate(evidence):
        for signal, value in row.items():
            if signal in column:
                x[i, column[signal]] = value
    for k, pair in enumerate(pairs, start=len(singles)):
        left, right = pair.split("*", 1)
        x[:, k] = x[:, column[left]] * x[:, column[right]]
    return x


class _Moments:
    """Weighted means and centred cross-products of the columns and the target, merged chunk
    by chunk (the pairwise update of Chan et al.: no cancellation from raw sums of squares)."""

    def __init__(self, columns: int) -> None:
        self.weight = 0.0
        self.mean_x, self.mean_y = np.zeros(columns), 0.0
        self.xx, self.xy, self.yy = np.zeros((columns, columns)), np.zeros(columns), 0.0

    def add(self, x: np.ndarray, y: np.ndarray, w: np.ndarray) -> None:
        weight = float(w.sum())
        if weight <= 0:
            return
        mean_x, mean_y = w @ x / weight, float(w @ y) / weight
        cx, cy = x - mean_x, y - mean_y
        wx = cx * w[:, None]
        xx, xy, yy = cx.T @ wx, wx.T @ cy, float(w @ (cy * cy))
        total = self.weight + weight
        dx, dy = mean_x - self.mean_x, mean_y - self.mean_y
        share = self.weight * weight / total
        self.xx += xx + share * np.outer(dx, dx)
        self.xy += xy + share * dx * dy
        self.yy += yy + share * dy * dy
        self.mean_x = self.mean_x + dx * weight / total
        self.mean_y = self.mean_y + dy * weight / total
        self.weight = total

    def solve(self, alpha: float) -> tuple[np.ndarray, float, float]:
        """Coefficients >= 0 minimising the weighted squared error plus ``alpha`` times their
        squared norm, the intercept, and the weighted R^2."""
        from scipy.optimize import nnls

        # b'(XX + aI)b - 2 b'XY is ||L'b - L^-1 XY||^2 up to a constant, with LL' = XX + aI.
        lower = np.linalg.cholesky(self.xx + alpha * np.eye(len(self.xy)))
        coefficients, _ = nnls(lower.T, np.linalg.solve(lower, self.xy))
        intercept = self.mean_y - float(self.mean_x @ coefficients)
        residual = self.yy - 2 * coefficients @ self.xy + coefficients @ self.xx @ coefficients
        r2 = 1.0 - float(residual) / self.yy if self.yy > 0 else 0.0
        return coefficients, intercept, r2


def _chunks(rows: Iterable[Row], size: int) -> Iterator[list[Row]]:
    chunk: list[Row] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
