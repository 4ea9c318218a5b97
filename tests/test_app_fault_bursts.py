"""One application fault logs several XIDs on its GPU within a second (31 as it page-faults, 43
as its channel stops, 45 as it is cleaned up): that is one fault, not three repeats. Before,
the three XIDs of a single fault made "3 XIDs on this GPU within days: suspect the GPU" at
once, and in ``node_compound``'s ``nc_loud_app_xid_elsewhere_2s`` (written apart from the
detector) that warning came before, and in seeds 8 and 9 instead of, the slowdown's event for
the node that slowed the job. Three faults on one GPU are evidence against it, on its record,
but no event without another sign of the GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.runner import run_in_process
from reflex_localize.schemas.codec import Point
from reflex_localize.shell.simulated_source import SimulatorSource

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def _events(name: str) -> list[LocalizationEvent]:
    return run_in_process(SimulatorSource(str(SCENARIOS / f"{name}.toml"), 7, 1, 10.0)).events


def test_two_faults_of_six_xids_are_no_pattern_on_the_gpu() -> None:
    assert _events("app_fault_bursts") == []


def test_three_faults_on_one_gpu_alone_are_the_gpus_record_not_a_page() -> None:
    """The catalogue's "repeats on one GPU" is evidence against the GPU, kept on its record
    across jobs; with no other sign of the GPU (no slowness, no heat, the job unslowed) it is no
    event: operators absorb application XIDs unless a hardware signal comes with them, and a
    warning's own reports do not back it."""
    records: list[Point] = []

    def keep(route: str, item: Any) -> None:
        if route == "points":
            records.extend(p for p in item if p.measurement == "reflex_record")

    source = SimulatorSource(str(SCENARIOS / "app_fault_bursts_thrice.toml"), 7, 1, 10.0)
    assert run_in_process(source, on_output=keep).events == []
    gpu = [
        p.fields["xids"]
        for p in records
        if (p.tags["node"], p.tags["component"], p.tags["index"]) == ("node-0002", "gpu", "1")
    ]
    # The record is exported every 30 windows: at 300 s it holds the faults of 100 s and 220 s.
    assert gpu == ["31x2,43x2,45x2"]
