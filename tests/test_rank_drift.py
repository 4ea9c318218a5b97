"""A rank against its own history (flows/judge/rank_drift.py): a silent clock drift is told, what
only looks like one is not.

The flow test runs a memory_matters scenario written apart from the detector: a GPU drifts
2.5% slow (clock 1950 -> 1901 MHz, no throttle reason) into the band where a third of the
fleet's binned GPUs already sit, so its peers cannot tell it from them.
"""

from __future__ import annotations

from memory_family_runs import run_memory_family

from reflex_localize.flows.judge.rank_drift import HOLD_S, RankDrift

STEP_NS = 8 * 10**9
CLOCK = 1950.0


def _run(
    ratios: list[float], clocks: list[float], throttled_at: frozenset[int] = frozenset()
) -> list:
    """Rank 1's ratio and clock per step (rank 0 steady); every drift told, with its step."""
    drift = RankDrift()
    told = []
    for step, (ratio, clock) in enumerate(zip(ratios, clocks, strict=True)):
        drift.observe_clocks({0: CLOCK, 1: clock}, {1} if step in throttled_at else set())
        told += [(step, d) for d in drift.observe_step({0: 1.0, 1: ratio}, step * STEP_NS)]
    return told


def test_a_rank_slower_with_its_clock_is_told_once() -> None:
    told = _run([1.0] * 40 + [1.03] * 60, [CLOCK] * 40 + [CLOCK * 0.975] * 60)
    assert len(told) == 1
    step, drift = told[0]
    assert drift.rank == 1 and round(drift.shift, 2) == 0.03 and round(drift.clock_drop, 3) == 0.025
    assert (step - 40) * STEP_NS / 1e9 >= HOLD_S  # held, not told at the change point


def test_a_rank_slower_with_its_clock_unchanged_is_left_to_the_other_rules() -> None:
    """A busy host or a slow disk slows a rank too: no clock, no drift."""
    assert _run([1.0] * 40 + [1.05] * 60, [CLOCK] * 100) == []


def test_an_episode_that_passes_is_not_a_drift_and_the_rank_is_watched_again() -> None:
    """A throttle's few slow steps open a change point that closes; a later drift is told."""
    ratios = [1.0] * 40 + [1.08] * 5 + [1.0] * 40 + [1.03] * 40
    clocks = [CLOCK] * 40 + [CLOCK * 0.9] * 5 + [CLOCK] * 40 + [CLOCK * 0.97] * 40
    told = _run(ratios, clocks, throttled_at=frozenset(range(40, 45)))
    assert [step >= 85 for step, _ in told] == [True]


def test_a_checkpoints_idle_windows_do_not_move_the_clock_it_is_judged_against() -> None:
    """A checkpoint drops a GPU's clock to ~600 MHz for a window or two: the "before" is a
    median, so a drift after it still measures against 1950 MHz, not less."""
    clocks = [CLOCK] * 30 + [600.0, 620.0] + [CLOCK] * 8 + [CLOCK * 0.975] * 60
    told = _run([1.0] * 40 + [1.03] * 60, clocks)
    assert len(told) == 1 and round(told[0][1].clock_drop, 3) == 0.025


def test_a_gpu_drifting_into_the_binned_band_is_named_by_its_own_history() -> None:
    events, onset_ns = run_memory_family("reflex", "drift_among")
    drifts = [e for e in events if e.trigger == "drift"]
    assert [(e.top.node, e.top.component, e.top.index) for e in drifts] == [
        ("node-0011", "gpu", "5")
    ]
    assert "2.5% below its own" in drifts[0].summary
    assert HOLD_S <= (drifts[0].time_ns - onset_ns) / 1e9 <= 600  # the evaluation's horizon


def test_peers_alone_do_not_see_it() -> None:
    events, _ = run_memory_family("peer_only", "drift_among")
    assert [e for e in events if e.trigger == "drift"] == []
