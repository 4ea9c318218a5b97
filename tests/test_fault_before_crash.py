"""A part on another node that was already slowing the job when an explicit error crashed it
gets an event of its own: the crash ends the job before the slow part's steps add up to a
straggler or a regression, and the restarted job would get the slow part back. Before, the
crash event listed it only as a second suspect, and ``incidents_coexist``'s
``ic_implicit_then_crash_25s`` (written apart from the detector) missed it in 3 of 3 seeds.
A part an event already named is not told again."""

from __future__ import annotations

from pathlib import Path

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
SLOW, CRASHED = ("node-0002", "gpu", "3"), ("node-0006", "gpu", "6")


def _tops(name: str) -> list[tuple[str, tuple[str, str, str]]]:
    events: list[LocalizationEvent] = run_in_process(
        SimulatorSource(str(SCENARIOS / f"{name}.toml"), 7, 1, 10.0)
    ).events
    return [(e.trigger, (e.top.node, e.top.component, e.top.index)) for e in events if e.top]


def test_a_part_slowing_the_job_before_a_crash_is_told_too() -> None:
    assert _tops("slow_gpu_then_crash") == [("explicit", CRASHED), ("regression", SLOW)]


def test_a_part_already_told_is_not_told_again_at_the_crash() -> None:
    assert _tops("straggler_then_crash") == [("straggler", SLOW), ("explicit", CRASHED)]
