"""Skewed clocks, a node that disappears and comes back, and a GPU lost mid-run, through the
real flow on simulated data."""

from __future__ import annotations

import numpy as np

from reflex_localize.flows.io.sources import MemorySource, split_windows
from reflex_localize.flows.runner import run_in_process
from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator import Simulation, load_scenario

WINDOW_NS = 10 * 10**9


def _frames(scenario: str) -> tuple[Simulation, list[Frame]]:
    sim = Simulation(load_scenario(scenario), seed=7)
    return sim, [frame for chunk in sim.chunks(seconds=10) for frame in chunk]


def _windows(frames: list[Frame]) -> list[tuple[int, list[Frame]]]:
    ordered = sorted(split_windows(frames, WINDOW_NS), key=lambda w: w[0])
    return [(window, window_frames) for window, window_frames, _ in ordered]


def _edit(frames: list[Frame], node: str, keep, shift_ns: int = 0) -> list[Frame]:
    """Drops the node's rows where ``keep(time)`` is false and shifts its clock."""
    out = []
    for frame in frames:
        mine = frame.tags["node"] == node
        times = frame.time_ns.copy()
        times[mine] += shift_ns
        edited = Frame(frame.measurement, times, frame.tags, frame.fields)
        drop = mine & ~keep(times)
        out.append(edited.take(~drop) if drop.any() else edited)
    return out


def test_a_node_that_disappears_is_an_event_and_comes_back_quietly() -> None:
    sim, frames = _frames("benign_quiet")
    node = sim.cluster.jobs[0].nodes[2]
    gone_from, back_at = sim.start_ns + 300 * 10**9, sim.start_ns + 420 * 10**9
    edited = _edit(frames, node, lambda t: (t < gone_from) | (t >= back_at))
    result = run_in_process(MemorySource(_windows(edited)))
    missing = [e for e in result.events if e.top is not None and e.top.node == node]
    assert len(missing) == 1, [e.summary for e in result.events]
    event = missing[0]
    assert event.trigger == "explicit" and "no telemetry" in event.summary
    assert gone_from < event.time_ns <= gone_from + 60 * 10**9


def test_a_clock_skewed_by_30_seconds_raises_no_false_event() -> None:
    """The replay is cut where every node still has data: past that, a node 30 s behind has
    simply run out of telemetry earlier than the others (a real absence, at the edge)."""
    for shift in (30, -30):
        sim, frames = _frames("benign_quiet")
        node = sim.cluster.jobs[0].nodes[1]
        end = sim.start_ns + int(sim.duration_s * 1e9) - 40 * 10**9
        edited = _edit(frames, node, lambda t: np.ones(len(t), bool), shift * 10**9)
        edited = [f.take(f.time_ns < end) for f in edited]
        result = run_in_process(MemorySource(_windows(edited)))
        blamed = [e for e in result.events if e.suspects]
        assert blamed == [], [e.summary for e in blamed]


def test_skewed_root_node_is_still_found() -> None:
    sim, frames = _frames("fault_xid79")
    truth = sim.truth[0]
    edited = _edit(frames, truth.node, lambda t: np.ones(len(t), bool), 30 * 10**9)
    result = run_in_process(MemorySource(_windows(edited)))
    tops = [(e.top.node, e.top.component, e.top.index) for e in result.events if e.top]
    assert (truth.node, "gpu", truth.index) in tops


def test_gpu_lost_mid_run_names_that_gpu_and_the_others_keep_being_scored() -> None:
    sim, frames = _frames("fault_xid79")
    truth = sim.truth[0]
    result = run_in_process(MemorySource(_windows(frames)))
    [event] = [e for e in result.events if e.job == truth.job]
    top = event.top
    assert top is not None and (top.node, top.index) == (truth.node, truth.index)
    assert any(e.signal.startswith("gpu_lost") for e in top.evidence)
    assert result.point_counts["reflex_score"] > 0 and not result.errors
