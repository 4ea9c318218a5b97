"""Medians of small groups, taken many times a window: the per-step view's
(flows/judge/step_peers.py, of small Python lists) must be the very floats ``np.median``
gives, bit for bit, or a ratio near a threshold could tip the other way; the peer
deviation's (flows/judge/detectors.py) must be
those of one median at a time."""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from test_group_medians import one_group_at_a_time

from reflex_localize.flows.judge.detectors import peer_deviation
from reflex_localize.flows.judge.step_peers import _faster_half, _median, role_ratios

_TIMES = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)


@given(st.lists(_TIMES | st.sampled_from([0.1, 0.2, 0.3, 1.0, 3.0]), min_size=1, max_size=40))
def test_median_is_numpys_bit_for_bit(values: list[float]) -> None:
    assert _bits(_median(values)) == _bits(float(np.median(values)))
    half = np.sort(values)[: (len(values) + 1) // 2]
    assert _bits(_faster_half(values)) == _bits(float(np.median(half)))


def test_median_of_nothing_is_nan() -> None:
    assert np.isnan(_median([]))


@given(st.lists(st.tuples(_TIMES, st.integers(0, 3)), min_size=2, max_size=30))
def test_role_ratios_are_those_of_numpy_medians(rows: list[tuple[float, int]]) -> None:
    values = np.array([v for v, _ in rows])
    groups = np.array([f"{g}|h100" for _, g in rows], object)
    ratio, z = role_ratios(values, groups, 0.02)
    expected = np.full(len(values), np.nan)  # the reference: numpy's medians throughout
    for group in np.unique(groups).tolist():
        members = np.flatnonzero(groups == group)
        if len(members) >= 2:
            ordered = np.sort(values[members])
            level = float(np.median(ordered[: (len(ordered) + 1) // 2]))
            expected[members] = values[members] / level
    judged = expected[np.isfinite(expected)]
    assert ratio.tobytes() == expected.tobytes()
    if len(judged):
        spread = 1.4826 * float(np.median(np.abs(judged - np.median(judged))))
        assert z.tobytes() == ((expected - 1.0) / max(spread, 0.02)).tobytes()


@given(
    st.lists(st.tuples(_TIMES | st.just(float("nan")), _TIMES, st.integers(0, 2)), min_size=1,
             max_size=30)
)  # fmt: skip
def test_peer_deviation_is_that_of_one_median_at_a_time(
    rows: list[tuple[float, float, int]],
) -> None:
    """The peer median and the pooled spread's median are taken in one sort: each column's
    median is still the one it has alone (detectors.nan_median, column by column)."""
    values = np.array([[v, v * 2] for v, _, _ in rows])
    scales = np.array([[s, s / 3] for _, s, _ in rows])
    groups = np.array([str(g) for _, _, g in rows], object)
    floors = np.array([0.01, 0.02])
    # The reference: three medians, one group at a time.
    expected = one_group_at_a_time(values, groups, floors, scales)
    assert (
        peer_deviation(values, groups, floors, pooled_scale=scales).tobytes() == expected.tobytes()
    )
