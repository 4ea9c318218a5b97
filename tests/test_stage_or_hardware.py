"""A pipeline stage slower on all its ranks from the start: partitioning, unless the node that
holds the stage shows the hardware reason on most of its GPUs (scenarios of the evaluation
families, written apart from the detector)."""

from __future__ import annotations

import pytest

from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

FAMILIES = "simulator/scenarios/families"
pytestmark = pytest.mark.slow


def test_a_last_stage_node_in_power_brake_is_hardware_not_partitioning() -> None:
    scenario = f"{FAMILIES}/launch_straggler/power_brake_last_stage_25s.toml"
    result = run_in_process(SimulatorSource(scenario, 7, 1, 10.0))
    (event,) = [e for e in result.events if e.job == "train"]
    assert event.top is not None and event.top.node == "node-0004"
    assert "hardware, not partitioning" in event.summary and event.severity == "warning"


def test_a_last_stage_of_a_quirky_fleet_is_still_partitioning() -> None:
    scenario = f"{FAMILIES}/static_imbalance/last_stage_quirky_fleet_8s.toml"
    for seed in (7, 8, 9):
        result = run_in_process(SimulatorSource(scenario, seed, 1, 10.0))
        assert result.events and all(e.no_hardware_fault for e in result.events), [
            e.summary for e in result.events
        ]
