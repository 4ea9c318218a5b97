"""A job's step-time regression is a slowdown that lasts: one long step (an unmarked
checkpoint) followed by a job back near its level is not one, and a job that stays at half
speed or worse is, as soon as before (flows/judge/triggers.py, StepRegression).

The window medians are a benign soak's (quirky_soak seed 229, job soak-a, 8 s steps): a
checkpoint's 38 s step, then a GPU's 40 s thermal throttle slowing two windows 5-7%. The
capped pause had given the CUSUM 3 of its 8, and the throttle the rest: a GPU was named for a
job regression."""

from __future__ import annotations

from reflex_localize.flows.judge.triggers import StepRegression

LEVEL = [8.64, 8.71, 8.71, 8.77, 8.36, 8.78, 8.70, 8.72, 8.69, 8.83, 8.49, 8.82, 8.74, 8.83]
SOAK_229 = [38.32, 9.12, 9.32, 9.05, 8.71, 8.70, 8.66]


def _fired(series: list[float]) -> bool:
    detector = StepRegression()
    return any([detector.update(step) for step in series])


def test_a_checkpoint_then_a_short_wobble_is_not_a_regression() -> None:
    assert not _fired(LEVEL * 5 + SOAK_229)


def test_the_same_wobble_after_two_pause_windows_is() -> None:
    assert _fired(LEVEL * 5 + [38.32, *SOAK_229])


def test_a_job_at_a_third_of_its_speed_is_caught_as_soon_as_before() -> None:
    """The first pause's increment is held, not lost: once the next window pauses too, both
    count, so three capped windows still cross the threshold at the third."""
    slow = StepRegression()
    windows = [i for i, step in enumerate(LEVEL * 5 + [26.0] * 6) if slow.update(step)]
    assert windows and windows[0] == len(LEVEL) * 5 + 2
