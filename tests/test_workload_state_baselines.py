"""Each part is judged against its own history in the same workload state: a GPU under load
against itself under load. A one-rank job has no peers, so its GPU's own busy history is all
there is: a clock locked low under load must stand out of it, and the idle windows before the
job must not widen it until 0.6 of the clock looks ordinary."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_localize.flows.judge import shard_step
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

SCENARIO = Path(__file__).resolve().parent / "scenarios" / "one_rank_clock_locked.toml"
ONSET_NS = 1767225600 * 10**9 + 300 * 10**9  # the scenario's clock lock


def _events() -> list[tuple[int, str, tuple[str, str, str], str]]:
    events = run_in_process(SimulatorSource(str(SCENARIO), 7, 1, 10.0)).events
    return [
        (e.time_ns, e.trigger, (e.top.node, e.top.component, e.top.index), e.top.evidence[0].signal)
        for e in events
        if e.top is not None
    ]


def test_a_one_rank_job_s_gpu_locked_low_is_named_for_its_clock_within_a_minute() -> None:
    [(time_ns, trigger, part, signal)] = _events()
    assert (trigger, part, signal) == ("regression", ("node-0001", "gpu", "0"), "sm_clock_low")
    assert 0 < time_ns - ONSET_NS <= 60 * 10**9


def test_with_one_baseline_for_all_states_the_clock_was_not_what_stood_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the states change: the same run with one baseline per entity."""
    monkeypatch.setattr(shard_step, "state_keys", lambda entities, *_: entities)
    assert [signal for *_, signal in _events()] != ["sm_clock_low"]
