"""The localization flow in real Bytewax: TestingSource -> run_main -> TestingSink, a replay of
line protocol against the in-process run, cascades, imbalance and the error stream."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from bytewax.testing import TestingSink, TestingSource, run_main

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.io.sinks import FlowSinks, SinkSpec
from reflex_localize.flows.io.sources import LineProtocolSource, split_windows
from reflex_localize.flows.localize import build_flow
from reflex_localize.flows.messages import WindowBatch
from reflex_localize.flows.runner import run_in_process
from reflex_localize.schemas.frame import Frame
from reflex_localize.shell.simulated_source import SimulatorSource
from reflex_localize.simulator import Simulation, load_scenario

WINDOW_NS = 10 * 10**9


def _batches(scenario: str, seed: int = 7) -> list[WindowBatch]:
    sim = Simulation(load_scenario(scenario), seed=seed)
    batches = []
    for frames in sim.chunks(seconds=10):
        for window, window_frames, _ in split_windows(frames, WINDOW_NS):
            batches.append(
                WindowBatch(
                    "shard-0", window, window * WINDOW_NS, (window + 1) * WINDOW_NS, window_frames
                )
            )
    return batches


def _run_testing(batches: list) -> tuple[list[LocalizationEvent], list]:
    events: list = []
    errors: list = []
    flow = build_flow(
        TestingSource(batches),
        FlowSinks(SinkSpec(TestingSink(events)), None, SinkSpec(TestingSink(errors))),
    )
    run_main(flow)
    return [e for _, e in events], [e for _, e in errors]


@pytest.fixture(scope="module")
def xid79_batches() -> list[WindowBatch]:
    return _batches("fault_xid79")


def test_testing_source_to_sink_localizes_the_root_not_the_cascade(xid79_batches) -> None:
    truth = Simulation(load_scenario("fault_xid79"), seed=7).truth[0]
    events, errors = _run_testing(xid79_batches)
    assert errors == []
    [event] = [e for e in events if e.job == truth.job]
    root = event.suspects[0]
    assert (root.node, root.component, root.index, root.role) == (
        truth.node,
        "gpu",
        truth.index,
        "root",
    )
    assert event.trigger == "explicit" and event.severity == "critical"
    # The cascade is louder (NCCL timeouts from many ranks) but comes later; none is blamed.
    cascade = [
        b
        for b in xid79_batches
        for f in b.frames
        if f.measurement == "event" and "nccl_timeout" in f.tags["kind"].tolist()
    ]
    assert cascade, "the scenario must carry a cascade for this test to mean anything"


def test_cascade_first_in_time_wins_over_loudest(xid79_batches) -> None:
    """Reorder nothing, but add a burst of NCCL timeouts from another node in the root's own
    window, timestamped after the XID: the root stays the XID's GPU."""
    truth = Simulation(load_scenario("fault_xid79"), seed=7).truth[0]
    batches = list(xid79_batches)
    target = next(i for i, b in enumerate(batches) if b.end_ns > truth.onset_ns)
    noisy = Frame(
        "event",
        np.array([truth.onset_ns + 10**6 * (k + 1) for k in range(20)]),
        {
            "cluster": np.array(["sim"] * 20, dtype=object),
            "node": np.array(["node-0001"] * 20, dtype=object),
            "source": np.array(["training"] * 20, dtype=object),
            "kind": np.array(["nccl_timeout"] * 20, dtype=object),
        },
        {
            "job": np.array([truth.job] * 20, dtype=object),
            "rank": np.arange(20, dtype=np.int64),
            "message": np.array(
                ["Watchdog caught collective operation timeout"] * 20, dtype=object
            ),
        },
    )
    batch = batches[target]
    batches[target] = WindowBatch(
        batch.shard, batch.window, batch.start_ns, batch.end_ns, [*batch.frames, noisy]
    )
    events, _ = _run_testing(batches)
    [event] = [e for e in events if e.job == truth.job]
    assert event.suspects[0].node == truth.node
    assert all(s.node != "node-0001" or s.role != "root" for s in event.suspects)


def test_bad_records_go_to_the_error_stream_counted(xid79_batches) -> None:
    batches = list(xid79_batches[:40])
    bad = Frame(
        "host",
        np.array([batches[3].start_ns + 1], dtype=np.int64),
        {"cluster": np.array(["sim"], dtype=object), "node": np.array(["node-0001"], dtype=object)},
        {"load1": np.array([np.nan])},
    )
    undeclared = Frame(
        "gpu_magic",
        np.array([batches[3].start_ns + 2], dtype=np.int64),
        {"node": np.array(["node-0001"], dtype=object)},
        {"x": np.array([1.0])},
    )
    b = batches[3]
    batches[3] = WindowBatch(b.shard, b.window, b.start_ns, b.end_ns, [*b.frames, bad, undeclared])
    _, errors = _run_testing(batches)
    # A fixed code per kind of reject (so they can be totalled), the value in the detail.
    by_code = {e.reason: e.detail for e in errors}
    assert len(errors) == 2 and set(by_code) == {"undeclared_measurement", "not_finite"}
    assert by_code["undeclared_measurement"].startswith("gpu_magic: undeclared measurement")
    assert by_code["not_finite"].startswith("host.load1: nan is not finite")


def test_pipeline_imbalance_names_no_hardware_suspect() -> None:
    result = run_in_process(SimulatorSource("fault_pipeline_imbalance", 7, 1, 10.0))
    assert result.events, "the imbalance slows the job: Reflex must say why"
    for event in result.events:
        assert event.suspects == [] and event.no_hardware_fault
        assert "not a fault" in event.summary


def test_fail_slow_gpu_is_found_by_its_clock(tmp_path: Path) -> None:
    sim = Simulation(load_scenario("fault_fail_slow_gpu"), seed=7)
    truth = sim.truth[0]
    result = run_in_process(SimulatorSource("fault_fail_slow_gpu", 7, 1, 10.0))
    [event] = result.events
    top = event.suspects[0]
    assert (top.node, top.component, top.index) == (truth.node, "gpu", truth.index)
    assert any(e.signal == "sm_clock_low" for e in top.evidence)
    assert 0 < (event.time_ns - truth.onset_ns) / 1e9 <= 90


@pytest.mark.slow
def test_replay_of_line_protocol_gives_the_same_events(tmp_path: Path) -> None:
    scenario = "fault_ib_flapping"
    sim = Simulation(load_scenario(scenario), seed=7)
    capture = tmp_path / "capture.lp"
    with capture.open("w") as out:
        for frames in sim.chunks(seconds=10):
            for frame in frames:
                out.writelines(line + "\n" for line in frame.lines())
    replayed = run_in_process(LineProtocolSource(capture, 1, 10.0))
    live = run_in_process(SimulatorSource(scenario, 7, 1, 10.0))
    assert replayed.errors == []
    assert [e.to_json() for e in replayed.events] == [e.to_json() for e in live.events]
    assert live.events and live.events[0].suspects[0].component == "nic"


def test_replay_counts_malformed_lines(tmp_path: Path) -> None:
    capture = tmp_path / "bad.lp"
    capture.write_text(
        "host,cluster=c,node=n load1=0.5 1000000000\n"
        "this is not line protocol\n"
        "host,cluster=c,node=n load1=NaN 2000000000\n"
        "gpu_magic,node=n x=1 3000000000\n"
    )
    result = run_in_process(LineProtocolSource(capture, 1, 10.0))
    assert len(result.errors) == 3
    assert all(e.where == "source" and "line " in e.detail for e in result.errors)
