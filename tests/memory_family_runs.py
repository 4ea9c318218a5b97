"""One memory_matters scenario run through the localization flow in process, for the tests
of the rules that judge a rank against its own history (test_rank_drift.py,
test_carried_drift.py)."""

from __future__ import annotations

from reflex_localize.flows.job_step import JobConfig
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource
from reflex_localize.simulator import Simulation, family_scenarios, load_scenario


def run_memory_family(mode: str, stem: str) -> tuple[list, int]:
    """The events in ``mode`` of the memory_matters scenario whose name starts with ``stem``
    (seed 7), and its one fault's onset (ns)."""
    [path] = [p for p in family_scenarios("memory_matters") if p.stem.startswith(stem)]
    [label] = Simulation(load_scenario(path), seed=7).truth
    source = SimulatorSource(str(path), 7, 1, 10.0)
    result = run_in_process(source, window_seconds=10.0, job_config=JobConfig(mode=mode))
    return result.events, label.onset_ns
