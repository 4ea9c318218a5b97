"""A part that never recovers is told once, not again each time the 15-minute cooldown runs
out. Before, a port flapping through a whole job was paged every 15 minutes as "recurs
(episode N)", though it had never gone quiet: in ``node_compound``'s quirky fleet (a family
written apart from the detector) that was one extra event in every seed. A part that did
recover and slows the job again past the cooldown is still told, as a recurrence."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource
from reflex_localize.simulator import Simulation, load_scenario

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


@pytest.mark.parametrize("seed", [7, 8])
def test_a_port_flapping_all_job_long_is_told_once(seed: int) -> None:
    path = str(SCENARIOS / "flapping_port_all_job.toml")
    events = run_in_process(SimulatorSource(path, seed, 1, 10.0)).events
    assert len(events) == 1, [e.summary for e in events]
    top = events[0].top
    assert top is not None and top.entity == "node-0004|nic|mlx5_2/1"
    assert "recurs" not in events[0].summary


def test_a_part_back_after_the_cooldown_is_told_again() -> None:
    path = str(SCENARIOS / "intermittent_past_cooldown.toml")
    sim = Simulation(load_scenario(path), seed=7)
    events = run_in_process(SimulatorSource(path, 7, 1, 10.0)).events
    assert [e.top.entity if e.top else None for e in events] == ["node-0004|gpu|5"] * 2
    second = (events[1].time_ns - sim.start_ns) / 1e9
    assert 1250 < second <= 1320
    assert events[1].summary.startswith("recurs (episode 2 in this job, told before at")
