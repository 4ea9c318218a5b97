"""The peer deviation takes every group's medians in one sort (flows/judge/detectors.py,
_group_medians): each must be the float the group's own sort gives (detectors.nan_median),
bit for bit, whatever the group sizes (one padded sort for groups of 4 and of 40), ties,
NaN and infinities."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from reflex_localize.flows.judge.detectors import nan_median, peer_deviation

_VALUES = st.floats(
    min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False
) | st.sampled_from([0.0, 1.0, 2.0, 3.0, float("inf"), -float("inf"), float("nan")])


def one_group_at_a_time(
    values: np.ndarray, groups: np.ndarray, floors: np.ndarray, scales: np.ndarray | None
) -> np.ndarray:
    expected = np.full(values.shape, np.nan)
    for group in np.unique(groups).tolist():
        members = np.flatnonzero(groups == group)
        if len(members) < 4:
            continue
        block = values[members]
        center = nan_median(block)
        with np.errstate(invalid="ignore", divide="ignore"):
            spread = np.fmax(1.4826 * nan_median(np.abs(block - center)), floors)
            if scales is not None:
                spread = np.fmax(spread, nan_median(scales[members]))
            expected[members] = (block - center) / spread
    return expected


@given(
    st.lists(st.tuples(_VALUES, _VALUES, st.integers(0, 3)), min_size=1, max_size=80),
    st.booleans(),
)
def test_group_medians_are_those_of_each_group_alone(
    rows: list[tuple[float, float, int]], pooled: bool
) -> None:
    values = np.array([[v, -v, 1.0] for v, _, _ in rows])
    scales = np.array([[abs(s), 0.5, abs(s) / 3] for _, s, _ in rows]) if pooled else None
    groups = np.array([f"g{g}" for _, _, g in rows], object)
    floors = np.array([0.01, 0.0, 0.02])
    expected = one_group_at_a_time(values, groups, floors, scales)
    with np.errstate(invalid="ignore", divide="ignore"):
        got = peer_deviation(values, groups, floors, pooled_scale=scales)
    assert got.tobytes() == expected.tobytes()
