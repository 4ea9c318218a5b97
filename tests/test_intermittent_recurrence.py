"""A part that slows the job, recovers, and slows it again is told each time: the second
episode is an intermittent fault (a fail-slow that comes and goes), the kind that fails job
after job, not the tail of the first incident. Before, the 15-minute cooldown folded every
later episode on the same node into the first event: in families written apart from the
detector, ``moving_node`` missed the second and third of three bursts in every seed and
``memory_matters`` the second of two. One long episode stays one event."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource
from reflex_localize.simulator import Simulation, load_scenario

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
GPU = ("node-0004", "gpu", "5")


def _run(name: str) -> tuple[Simulation, list[LocalizationEvent]]:
    path = str(SCENARIOS / f"{name}.toml")
    return Simulation(load_scenario(path), seed=7), run_in_process(
        SimulatorSource(path, 7, 1, 10.0)
    ).events


def _seconds(sim: Simulation, event: LocalizationEvent) -> float:
    return (event.time_ns - sim.start_ns) / 1e9


def test_each_episode_of_an_intermittent_part_is_told() -> None:
    sim, events = _run("intermittent_fail_slow")
    named = [e for e in events if e.top and (e.top.node, e.top.component, e.top.index) == GPU]
    assert len(named) == len(events) == 2, [e.summary for e in events]
    first, second = named
    assert 150 < _seconds(sim, first) <= 210 and 450 < _seconds(sim, second) <= 510
    assert "recurs" not in first.summary
    assert second.summary.startswith("recurs (episode 2 in this job, told before at")
    assert "intermittent part" in second.action


@pytest.mark.parametrize("seed", [7, 8])
def test_one_long_episode_is_one_event(seed: int) -> None:
    path = str(SCENARIOS / "long_fail_slow.toml")
    events = run_in_process(SimulatorSource(path, seed, 1, 10.0)).events
    assert len(events) == 1, [e.summary for e in events]
    assert events[0].top is not None and events[0].top.node == GPU[0]
