"""One application fault logs several XIDs on its GPU within a second (31 as it page-faults, 43
as its channel stops, 45 as it is cleaned up): that is one fault, not three repeats. Before,
the three XIDs of a single fault made "3 XIDs on this GPU within days: suspect the GPU" at
once, and in ``node_compound``'s ``nc_loud_app_xid_elsewhere_2s`` (written apart from the
detector) that warning came before, and in seeds 8 and 9 instead of, the slowdown's event for
the node that slowed the job. Three faults on one GPU are still a warning against it."""

from __future__ import annotations

from pathlib import Path

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def _events(name: str) -> list[LocalizationEvent]:
    return run_in_process(SimulatorSource(str(SCENARIOS / f"{name}.toml"), 7, 1, 10.0)).events


def test_two_faults_of_six_xids_are_no_pattern_on_the_gpu() -> None:
    assert _events("app_fault_bursts") == []


def test_three_faults_on_one_gpu_are_a_warning_against_it() -> None:
    events = _events("app_fault_bursts_thrice")
    assert [(e.severity, e.top.node, e.top.component, e.top.index) for e in events if e.top] == [
        ("warning", "node-0002", "gpu", "1")
    ]
    assert "3 faults on this GPU" in events[0].summary
