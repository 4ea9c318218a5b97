"""One memory_matters scenario run through the localization flow in process, for the tests
of the rules that judge a rank against its own history (test_rank_drift.py,
test_carried_drift.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reflex_localize.flows.judge.job_step import JobConfig
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource
from reflex_localize.simulator import Simulation, family_scenarios, load_scenario


def run_memory_family(
    mode: str, stem: str, seed: int = 7, on_output: Callable[[str, Any], None] | None = None
) -> tuple[list, int]:
    """The events in ``mode`` of the memory_matters scenario named ``stem`` (or, failing
    that, the one whose name starts with it), and its last fault's onset (ns)."""
    paths = family_scenarios("memory_matters")
    [path] = [p for p in paths if p.stem == stem] or [p for p in paths if p.stem.startswith(stem)]
    label = Simulation(load_scenario(path), seed=seed).truth[-1]
    source = SimulatorSource(str(path), seed, 1, 10.0)
    config = JobConfig(mode=mode)
    result = run_in_process(source, window_seconds=10.0, job_config=config, on_output=on_output)
    return result.events, label.onset_ns
