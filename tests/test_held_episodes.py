"""A regression is told some windows after its slowdown began; the burst that caused it may
be over by then. A part whose evidence held for the persistence rule's two windows and ended
while the job slowed still counts as held (JobState._held); one that ended before the slowdown
began, or that never held that long (a throttle of a few seconds), does not.

A GPU that fell to 92% of its clock for 75 s in its second job was told at 1,710 s, 35 s after
its burst ended (memory_matters' recurring_fail_slow_moves_25s)."""

from __future__ import annotations

from reflex_localize.flows.judge.job_step import JobConfig, JobState

WINDOW_NS = 10 * 10**9
GPU = "node-0006|gpu|1"


def _state(onset_window: int) -> JobState:
    state = JobState("b", JobConfig())
    state.slowdown_onset_ns = onset_window * WINDOW_NS
    return state


def _episode(state: JobState, first: int, gone: int) -> None:
    """Evidence present from window ``first`` to the window before ``gone``."""
    state.book.since[(GPU, "sm_clock_low")] = first * WINDOW_NS
    state.book._stop((GPU, "sm_clock_low"), gone * WINDOW_NS)


def test_an_episode_that_held_and_ended_during_the_slowdown_counts() -> None:
    state = _state(onset_window=162)
    _episode(state, first=161, gone=168)  # present 161..167, the job slowing from 162
    assert (GPU, "sm_clock_low") not in state.book.since
    assert state._held(GPU, 171 * WINDOW_NS)


def test_an_episode_over_before_the_slowdown_began_does_not() -> None:
    state = _state(onset_window=170)
    _episode(state, first=161, gone=168)
    assert not state._held(GPU, 171 * WINDOW_NS)


def test_an_episode_shorter_than_two_windows_does_not() -> None:
    state = _state(onset_window=162)
    _episode(state, first=165, gone=167)  # present in 165 and 166 only
    assert not state._held(GPU, 171 * WINDOW_NS)
