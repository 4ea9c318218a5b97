"""The streamed impact fit (flows/impact/fit.py) finds the minimum scikit-learn's non-negative
ridge finds when run to a tight tolerance, whatever the chunking, with weighted rows."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import Ridge

from reflex_localize.flows.impact import fit as impact_fit
from reflex_localize.flows.impact.fit import Row, design, fit_impact_passes
from reflex_localize.flows.impact.model import clipped_slowdown

SIGNALS = ["ecc_corrected_rate", "throttle_thermal", "sm_clock_low", "host_cpu_pressure"]
TRUE_COST = {"ecc_corrected_rate": 0.02, "throttle_thermal": 0.01, "sm_clock_low": 0.0}


def synthetic_rows(seed: int = 3, n: int = 5000) -> list[Row]:
    """Ranks whose slowdown follows known costs (host CPU pressure makes ranks faster here: its
    coefficient must stay at 0), and folded rows without anomaly standing for many ranks."""
    rng = np.random.default_rng(seed)
    rows: list[Row] = []
    for _ in range(n):
        evidence = {s: float(rng.uniform(0, 3)) for s in SIGNALS if rng.random() < 0.3}
        slowdown = sum(TRUE_COST.get(s, -0.01) * v for s, v in evidence.items())
        rows.append((evidence, slowdown + float(rng.normal(0, 0.01)), 1.0))
    rows += [({}, float(rng.normal(0, 0.002)), float(rng.integers(5, 50))) for _ in range(300)]
    return rows


def test_the_streamed_fit_is_the_exact_non_negative_ridge(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = synthetic_rows()
    model = fit_impact_passes(lambda: iter(rows))
    names = list(model.features)
    singles, pairs = [n for n in names if "*" not in n], [n for n in names if "*" in n]
    x = design([e for e, _, _ in rows], singles, pairs)
    y = clipped_slowdown(np.array([s for _, s, _ in rows]))
    w = np.array([weight for _, _, weight in rows])
    tight = Ridge(alpha=1.0, positive=True, tol=1e-12, max_iter=100_000).fit(x, y, sample_weight=w)
    assert model.coefficients == pytest.approx(tight.coef_, abs=2e-6)
    assert model.intercept == pytest.approx(tight.intercept_, abs=2e-6)
    assert model.provenance["r2"] == pytest.approx(tight.score(x, y, sample_weight=w), abs=1e-4)
    assert model.provenance["rows"] == round(w.sum())
    cost = dict(zip(names, model.coefficients, strict=True))
    assert cost["ecc_corrected_rate"] == pytest.approx(0.02, abs=0.002)
    assert cost["host_cpu_pressure"] == 0.0  # it goes with faster ranks: never a negative cost

    monkeypatch.setattr(impact_fit, "CHUNK", 97)  # many small chunks, merged
    chunked = fit_impact_passes(lambda: iter(rows))
    assert chunked.coefficients == pytest.approx(model.coefficients, abs=1e-6)
    assert chunked.intercept == pytest.approx(model.intercept, abs=1e-6)


def test_too_few_rows_or_no_anomaly_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="too few"):
        fit_impact_passes(lambda: iter([({"sm_clock_low": 1.0}, 0.01, 1.0)] * 5))
    with pytest.raises(ValueError, match="no anomaly"):
        fit_impact_passes(lambda: iter([({}, 0.0, 30.0)]))
