"""The detector conformance suite (STYLE.md): every detector pickles, leaves its inputs alone,
scores before learning, stays bounded, is deterministic under a seed and beats chance."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from reflex_localize.flows.judge.detectors import (
    CompoundScore,
    LongitudinalBaseline,
    peer_deviation,
)
from reflex_localize.flows.judge.triggers import StepRegression

ENTITIES = np.array([f"node-{i:03d}|gpu|0" for i in range(32)], dtype=object)
FLOORS = np.array([0.5, 0.5])


@dataclass
class Harness:
    """Adapts one detector to the suite: fresh(), learn(det, x), score(det, x) -> array."""

    name: str
    fresh: Callable[[], object]
    learn: Callable[[object, np.ndarray], None]
    score: Callable[[object, np.ndarray], np.ndarray]


def _baseline_learn(det, x):
    det.learn_many(ENTITIES, x)


def _baseline_score(det, x):
    return det.score_many(ENTITIES, x)[:, 0]


def _peer_score(det, x):
    # Stateless: the peers are the other entities of the same window.
    return peer_deviation(x, np.array(["g"] * len(x), dtype=object), FLOORS)[:, 0]


def _compound_score(det, x):
    return det.update(ENTITIES, np.clip(x[:, 0] - 3.0, 0, None))


def _regression_learn(det, x):
    det.update(float(np.exp(np.median(x[:, 0]) / 50)))


def _regression_score(det, x):
    return np.full(len(x), det.deviation(float(np.exp(np.median(x[:, 0]) / 50))))


HARNESSES = [
    Harness(
        "longitudinal",
        lambda: LongitudinalBaseline(2, FLOORS, warmup=5),
        _baseline_learn,
        _baseline_score,
    ),
    Harness("peer", lambda: None, lambda det, x: None, _peer_score),
    Harness("compound", lambda: CompoundScore(decay=0.8), lambda det, x: None, _compound_score),
    Harness(
        "step_regression", lambda: StepRegression(warmup=5), _regression_learn, _regression_score
    ),
]


def _normal(rng: np.random.Generator) -> np.ndarray:
    return rng.normal([60.0, 1.0], [1.0, 0.1], size=(len(ENTITIES), 2))


@pytest.mark.parametrize("h", HARNESSES, ids=lambda h: h.name)
def test_scores_before_learning(h: Harness) -> None:
    out = h.score(h.fresh(), _normal(np.random.default_rng(0)))
    assert out.shape == (len(ENTITIES),)


@pytest.mark.parametrize("h", HARNESSES, ids=lambda h: h.name)
def test_does_not_mutate_inputs(h: Harness) -> None:
    det, x = h.fresh(), _normal(np.random.default_rng(1))
    copy = x.copy()
    h.learn(det, x)
    h.score(det, x)
    np.testing.assert_array_equal(x, copy)


@pytest.mark.parametrize("h", HARNESSES, ids=lambda h: h.name)
def test_pickles_and_scores_the_same_after(h: Harness) -> None:
    rng = np.random.default_rng(2)
    det = h.fresh()
    for _ in range(10):
        h.learn(det, _normal(rng))
    clone = pickle.loads(pickle.dumps(det))
    probe = _normal(rng)
    np.testing.assert_array_equal(h.score(clone, probe), h.score(det, probe))


@pytest.mark.parametrize("h", HARNESSES, ids=lambda h: h.name)
def test_memory_stays_bounded(h: Harness) -> None:
    rng = np.random.default_rng(3)
    det = h.fresh()
    for _ in range(20):
        h.learn(det, _normal(rng))
        h.score(det, _normal(rng))
    size = len(pickle.dumps(det))
    for _ in range(200):
        h.learn(det, _normal(rng))
        h.score(det, _normal(rng))
    assert len(pickle.dumps(det)) <= size * 1.1 + 256


@pytest.mark.parametrize("h", HARNESSES, ids=lambda h: h.name)
def test_deterministic_under_a_seed(h: Harness) -> None:
    def run() -> np.ndarray:
        rng, det = np.random.default_rng(4), h.fresh()
        for _ in range(15):
            h.learn(det, _normal(rng))
        return h.score(det, _normal(rng))

    np.testing.assert_array_equal(run(), run())


@pytest.mark.parametrize(
    "h", [h for h in HARNESSES if h.name != "step_regression"], ids=lambda h: h.name
)
def test_beats_chance_on_injected_faults(h: Harness) -> None:
    """An entity shifted by 6 spreads must outscore the healthy ones (AUC near 1)."""
    rng = np.random.default_rng(5)
    det = h.fresh()
    for _ in range(30):
        h.learn(det, _normal(rng))
    x = _normal(rng)
    faulty = rng.choice(len(ENTITIES), size=4, replace=False)
    x[faulty, 0] += 6.0
    scores = np.nan_to_num(h.score(det, x), nan=0.0)
    healthy = np.setdiff1d(np.arange(len(ENTITIES)), faulty)
    auc = np.mean([scores[f] > scores[g] for f in faulty for g in healthy])
    assert auc > 0.95


def test_step_regression_beats_chance() -> None:
    rng = np.random.default_rng(6)
    fired_clean = fired_slow = 0
    for trial in range(20):
        det = StepRegression()
        series = list(rng.normal(1.0, 0.03, 40))
        if trial % 2:
            series += list(rng.normal(1.25, 0.03, 10))
        else:
            series += list(rng.normal(1.0, 0.03, 10))
        fired = any(det.update(v) for v in series)
        fired_slow += fired and trial % 2 == 1
        fired_clean += fired and trial % 2 == 0
    assert fired_slow == 10 and fired_clean == 0


def test_anomalies_are_kept_out_of_the_baseline() -> None:
    det = LongitudinalBaseline(2, FLOORS, warmup=5)
    rng = np.random.default_rng(7)
    for _ in range(30):
        det.learn_many(ENTITIES, _normal(rng))
    before = det.mean.copy()
    spike = _normal(rng)
    spike[0, 0] += 50.0
    det.learn_many(ENTITIES, spike)
    assert abs(det.mean[0, 0] - before[0, 0]) < 0.5


def test_merge_matches_learning_everything_in_one() -> None:
    rng = np.random.default_rng(8)
    # No clipping or protection here: this checks the statistics, not the robustness.
    a, b, both = (
        LongitudinalBaseline(2, FLOORS, warmup=1, horizon=10**9, clip=1e9, protect=1e9)
        for _ in range(3)
    )
    for i in range(40):
        x = _normal(rng)
        (a if i < 20 else b).learn_many(ENTITIES, x)
        both.learn_many(ENTITIES, x)
    merged = a.merge(b)
    np.testing.assert_allclose(merged.mean, both.mean, rtol=1e-6)
    np.testing.assert_allclose(merged.var, both.var, rtol=1e-6)
