"""A pipeline stage slower on all its ranks is told as partitioning only after its node had
the windows a slowed job gets to show its cause: a host that stalls its one-node stage shows
its IO wait in its score a few windows after the stage's steps slow (JobTriggers._waiting_stage)."""

from __future__ import annotations

from pathlib import Path

from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def test_a_stage_whose_host_stalls_is_the_hosts_fault_not_partitioning() -> None:
    source = SimulatorSource(str(SCENARIOS / "pipe_stage_host_stall.toml"), 7, 1, 10.0)
    events = [e for e in run_in_process(source).events if e.job == "pipe"]
    assert [(e.severity, e.top.entity if e.top else None) for e in events] == [
        ("warning", "node-0001|host|-")
    ]
    assert "hardware, not partitioning" in events[0].summary
