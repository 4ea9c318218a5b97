"""A regression is a slowdown: the part it names must show slowness. Corrected errors (an MCE,
a remap) add to a part's compound score but do not make it the lead of a slowdown.

A 6-hour benign soak of a quirky fleet named a host for a job regression because two corrected
MCEs arrived in the window the regression fired (score 4.0: 2.0 each), over a mild slowness of
its ranks that had held since the job's start (0.29)."""

from __future__ import annotations

import numpy as np

from reflex_localize.flows.judge.job_step import JobConfig, JobState
from reflex_localize.flows.messages import ExplicitEvent

HOUR_NS = 3600 * 10**9
END_NS = 6 * HOUR_NS
HOST = "node-0019|host|-"
GPU = "node-0007|gpu|3"


def _mce(node: str, code: int, time_ns: int) -> ExplicitEvent:
    meaning = "Machine check events logged (corrected)"
    return ExplicitEvent(time_ns, node, "mce", code, "host", "-", "warning", meaning, "", "j")


def _window(state: JobState, totals: dict[str, float], corrected: dict[str, float]) -> None:
    """One window's evidence into the scores, as JobState._process puts it."""
    for scores, amounts in ((state.compound, totals), (state.corrected, corrected)):
        keys = np.array(sorted(amounts), dtype=object)
        scores.update(keys, np.array([amounts[k] for k in keys.tolist()]))


def _state_with_mce_host() -> tuple[JobState, dict[str, float], dict[str, float]]:
    state = JobState("j", JobConfig())
    totals: dict[str, float] = {HOST: 0.29}  # its ranks a little slow, since the job's start
    state.book.since[(HOST, "step_time_slow")] = HOUR_NS // 60
    corrected: dict[str, float] = {}
    state.book.explicit([_mce("node-0019", 24, END_NS - 2 * 10**9),
                         _mce("node-0019", 3, END_NS - 10**9)], totals, corrected)  # fmt: skip
    state.fresh = {HOST}
    return state, totals, corrected


def test_corrected_mces_alone_do_not_make_a_regression_suspect() -> None:
    state, totals, corrected = _state_with_mce_host()
    _window(state, totals, corrected)
    assert state.compound.get(HOST) >= state.config.min_suspect_score  # the score is there
    assert state._strong_suspect(END_NS) is None


def test_a_part_that_shows_slowness_is_still_named() -> None:
    state, totals, corrected = _state_with_mce_host()
    totals[GPU] = 3.5  # clocks off its history and peers for minutes
    state.book.since[(GPU, "sm_clock_low")] = END_NS - 5 * 60 * 10**9
    state.fresh.add(GPU)
    _window(state, totals, corrected)
    assert state.compound.get(HOST) > state.compound.get(GPU)  # the MCE host scores higher
    top = state._strong_suspect(END_NS)
    assert top is not None and top.entity == GPU
