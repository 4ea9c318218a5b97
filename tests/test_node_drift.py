"""A one-node job whose GPUs all drift slower together is told against the node: no rank
stands out from the others and no peer node exists, so only the job's own history shows it
(flows/judge/node_drift.py). Slower steps with the clocks unchanged are no drift."""

from __future__ import annotations

from pathlib import Path

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def _events(name: str) -> list[LocalizationEvent]:
    return run_in_process(SimulatorSource(str(SCENARIOS / f"{name}.toml"), 7, 1, 10.0)).events


def test_every_gpu_of_a_one_node_job_drifting_is_the_nodes_drift() -> None:
    events = [e for e in _events("solo_node_drift") if e.job == "solo"]
    assert [(e.trigger, e.severity, e.top.node, e.top.component) for e in events if e.top] == [
        ("drift", "warning", "node-0001", "node")
    ]
    assert [s.component for s in events[0].suspects[1:9]] == ["gpu"] * 8


def test_slower_steps_with_the_clocks_unchanged_are_no_drift() -> None:
    # (The host's IO wait is told as a regression of the host: one node has no peer to show
    # the filesystem shared.)
    events = _events("solo_storage_slow")
    assert [e.trigger for e in events] == ["regression"]
    assert [(e.top.node, e.top.component) for e in events if e.top] == [("node-0001", "host")]
