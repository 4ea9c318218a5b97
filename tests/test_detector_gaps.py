"""The seven gaps of issue 16, each on a scenario of the families written apart from the
detector (``simulator/scenarios/families/``). Every test here failed before its fix (run
against the flow of d4c5fd2 with these scenarios; see the issue's closing note)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.judge.job_evidence import EvidenceBook
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource
from reflex_localize.simulator import Simulation, load_scenario

FAMILIES = Path(__file__).resolve().parent.parent / "simulator" / "scenarios" / "families"
pytestmark = pytest.mark.slow


def _run(family: str, name: str) -> tuple[Simulation, list[LocalizationEvent]]:
    path = str(FAMILIES / family / f"{name}.toml")
    sim = Simulation(load_scenario(path), seed=7)
    return sim, run_in_process(SimulatorSource(path, 7, 1, 10.0)).events


def _seconds(sim: Simulation, event: LocalizationEvent) -> float:
    return (event.time_ns - sim.start_ns) / 1e9


def _named(events: list[LocalizationEvent], node: str, component: str, index: str = "") -> list:
    return [
        e for e in events
        if e.top is not None and (e.top.node, e.top.component) == (node, component)
        and (not index or e.top.index == index)
    ]  # fmt: skip


def test_gap1_a_power_cap_is_read_from_the_enforced_limit() -> None:
    """Only power_limit_watts and the software power-cap bit tell a cap from a slow GPU."""
    sim, events = _run("hidden_fields", "power_cap_dp2_8s")
    [label] = sim.truth
    named = _named(events, label.node, "gpu", label.index)
    assert named, [e.summary for e in events]
    signals = {e.signal for e in named[0].top.evidence} if named[0].top else set()
    assert {"power_limit_low", "throttle_sw_power_cap"} & signals


def test_gap2_a_port_trained_down_from_the_start_is_a_communication_straggler() -> None:
    """Everyone waits on the port, so no rank's compute stands out; its rate does."""
    sim, events = _run("comm_straggler", "rate_dp8_from_start_2s")
    [label] = sim.truth
    named = _named(events, label.node, "nic", label.index)
    assert named and named[0].trigger == "comm_straggler", [e.summary for e in events]
    assert _seconds(sim, named[0]) - (label.onset_ns - sim.start_ns) / 1e9 <= 120


def test_gap3_a_second_fault_on_another_node_gets_its_own_event() -> None:
    sim, events = _run("incidents_coexist", "two_implicit_two_nodes_8s")
    for label in sim.truth:
        named = _named(events, label.node, "gpu", label.index)
        assert named, (label.node, [e.summary for e in events])
        assert named[0].time_ns >= label.onset_ns


def test_gap4_checkpoints_raise_no_hardware_event() -> None:
    """Two jobs checkpointing for 60 s every 300 s: pauses, busy disks, idle GPUs; no fault."""
    _, events = _run("checkpoint_phases", "benign_two_jobs_300s_60s")
    assert all(e.top is None for e in events), [e.summary for e in events]


def test_gap5_a_node_with_a_record_is_told_sooner_in_its_next_job() -> None:
    sim, events = _run("moving_node", "fail_slow_bursts_8s")
    _, control = _run("moving_node", "fail_slow_bursts_8s_control")
    label = next(lb for lb in sim.truth if lb.job == "b")
    with_history = _named([e for e in events if e.job == "b"], label.node, "gpu", label.index)
    without = _named([e for e in control if e.job == "b"], label.node, "gpu", label.index)
    assert with_history and without
    assert with_history[0].time_ns < without[0].time_ns
    assert any(e.signal.startswith("record") for e in with_history[0].top.evidence) or (
        with_history[0].trigger == "straggler"
    )


def test_gap6_small_anomalies_spread_over_a_node_add_up_to_the_node() -> None:
    """Three parts of one node, each a little off, outrank one part of another node that is
    as far off as any one of them; a single loud part still leads on its own."""
    book = EvidenceBook()
    spread = {"n1|gpu|0": 1.0, "n1|gpu|5": 1.0, "n1|nic|mlx5_0/1": 1.0, "n2|gpu|3": 1.2}
    book.node_compound(spread, 0)
    assert max(spread, key=lambda e: spread[e]) == "n1|node|-"
    loud = {"n1|gpu|0": 5.0, "n1|nic|mlx5_0/1": 0.5}
    book.node_compound(loud, 0)
    assert max(loud, key=lambda e: loud[e]) == "n1|gpu|0"


def test_gap7_an_xid_from_the_kernel_log_names_the_gpu_by_its_index() -> None:
    """The kernel log says PCI:0000:3a:00; NVML's gpu_info says which index that bus is."""
    sim, events = _run("one_gpu_two_sources", "xid79_kmsg_only_8s")
    [label] = sim.truth
    named = _named(events, label.node, "gpu", label.index)
    assert named and named[0].trigger == "explicit", [e.summary for e in events]
