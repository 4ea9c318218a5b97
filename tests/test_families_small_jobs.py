"""The small_jobs family carries what it claims (simulator/scenarios/families/README.md).

Simulated telemetry and truth only, no verdict of Reflex: every job has one or two nodes; each
fault slows its job; the benign heavier workload raises the node's power and temperature and
lowers its clock by at most 2 %, while the cooling fault lowers the clock at the same power.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from reflex_localize.schemas.frame import Frame, validate_frame
from reflex_localize.simulator import Simulation, family_scenarios, load_scenario
from reflex_localize.simulator.faults import SW_POWER_CAP
from reflex_localize.simulator.tables import concat_frames

ALL = family_scenarios("small_jobs")
FAULTY = [path for path in ALL if load_scenario(path).faults]


def named(stem: str) -> Path:
    [path] = [p for p in ALL if p.stem == stem]
    return path


@cache
def run(path: Path, without_faults: bool = False) -> tuple[Simulation, dict[str, Frame]]:
    """The simulation at seed 7 and one table per measurement (faults draw nothing from the
    schedule here, so the run without them has the same noise)."""
    scenario = load_scenario(path)
    if without_faults:
        scenario = dataclasses.replace(scenario, faults=())
    sim = Simulation(scenario, seed=7)
    frames: dict[str, list[Frame]] = defaultdict(list)
    for chunk in sim.chunks(seconds=10.0):
        for frame in chunk:
            assert not validate_frame(frame)[1], frame.measurement
            frames[frame.measurement].append(frame)
    return sim, {name: concat_frames(group) for name, group in frames.items()}


def seconds(sim: Simulation, table: Frame) -> np.ndarray:
    return (table.time_ns - sim.start_ns) / 1e9


def median_step(sim: Simulation, tables: dict[str, Frame], job: str, since: float) -> float:
    steps = tables["train_step"]
    rows = (steps.tags["job"] == job) & (seconds(sim, steps) >= since)
    return float(np.median(steps.fields["step_time_seconds"][rows]))


def before_after(path: Path, node: str, field: str, before: float, after: float) -> float:
    """The node's GPUs' median ``field`` over [after, end) against [60, before): a ratio."""
    sim, tables = run(path)
    gpu = tables["gpu"]
    at, mine = seconds(sim, gpu), gpu.tags["node"] == node
    values = gpu.fields[field].astype(float)
    return float(np.median(values[mine & (at >= after)]) /
                 np.median(values[mine & (at >= 60) & (at < before)]))  # fmt: skip


def test_small_jobs_several_gpus_and_step_times_benign_cases_named_so() -> None:
    scenarios = [load_scenario(path) for path in ALL]
    assert len({s.name for s in scenarios}) == len(ALL) >= 8
    assert all(s.name.startswith("sj_") for s in scenarios)
    for path, scenario in zip(ALL, scenarios, strict=True):
        assert path.stem.startswith("benign_") == (not scenario.faults), path.stem
        assert all(job.nodes <= 2 for job in scenario.jobs), path.stem
    assert {p for s in scenarios for p in s.profiles} == {
        "h100-sxm5-80gb", "a100-sxm4-80gb", "h200-sxm-141gb"}  # fmt: skip
    step_s = [job.step_s for s in scenarios for job in s.jobs]
    assert min(step_s) <= 2.0 and max(step_s) >= 47.0


@pytest.mark.parametrize("path", FAULTY, ids=[p.stem for p in FAULTY])
def test_each_fault_slows_its_small_job_and_its_label_names_a_node_of_it(path: Path) -> None:
    sim, tables = run(path)
    clean_sim, clean = run(path, without_faults=True)
    [label] = sim.truth
    job = next(j for j in sim.cluster.jobs if j.name == label.job)
    assert len(job.nodes) <= 2 and label.node in job.nodes
    settled = (label.onset_ns - sim.start_ns) / 1e9 + 300  # drifts and thermal rises settle
    slow = median_step(sim, tables, job.name, settled)
    assert slow > 1.015 * median_step(clean_sim, clean, job.name, settled)


def test_the_heavier_workload_raises_power_and_heat_the_cooling_fault_does_not() -> None:
    heavier = named("benign_solo_heavier_batch_h100_8s")
    assert before_after(heavier, "node-0001", "power_watts", 540, 600) > 1.1
    assert before_after(heavier, "node-0001", "temperature_celsius", 540, 600) > 1.05
    assert 0.98 <= before_after(heavier, "node-0001", "sm_clock_mhz", 540, 600) < 1.0
    cooling = named("solo_cooling_h200_25s")
    assert abs(before_after(cooling, "node-0002", "power_watts", 600, 900) - 1) < 0.01
    assert before_after(cooling, "node-0002", "temperature_celsius", 600, 900) > 1.08
    assert before_after(cooling, "node-0002", "sm_clock_mhz", 600, 900) < 0.97


def test_at_the_power_limit_the_heavier_workload_carries_the_power_cap_reason() -> None:
    sim, tables = run(named("benign_solo_heavier_at_cap_a100_25s"))
    gpu = tables["gpu"]
    at = seconds(sim, gpu)
    solo = gpu.tags["node"] == "node-0001"
    reasons = gpu.fields["clocks_event_reasons"]
    assert (reasons[solo & (at >= 600)] & SW_POWER_CAP).all()
    assert not (reasons[solo & (at < 600)] & SW_POWER_CAP).any()
    assert np.median(gpu.fields["power_watts"][solo & (at >= 700)]) > 0.97 * 400
