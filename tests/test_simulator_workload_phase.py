"""A heavier workload (``[[benign]] kind = "workload_heavier"``) looks like the job's own work.

Simulated telemetry only: from the phase's start the job computes slower by its factor, its
GPUs draw more power and run warmer, and GPU Boost settles 0-2 % lower; below the power limit
no clock event reason is set, at the limit the software power cap reason is.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache

import numpy as np
import pytest

from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator import Simulation
from reflex_localize.simulator.faults import SW_POWER_CAP
from reflex_localize.simulator.scenario import ScenarioError, parse_scenario
from reflex_localize.simulator.tables import concat_frames

PHASE_S = 120  # the phase starts here; the job runs from 0 to 240 s


def scenario(factor: float = 1.2, power: float = 1.15, profile: str = "h100-sxm5-80gb") -> dict:
    return {
        "name": "workload_phase",
        "duration_s": 240,
        "cluster": {"nodes": 1, "profiles": {profile: 1}},
        "quirks": {"hot_nodes": 0, "slow_clock_gpus": 0, "noisy_ports": 0},
        "background": {
            "throttle_per_gpu_hour": 0.0,
            "cpu_contention_per_node_hour": 0.0,
            "congestion_per_job_hour": 0.0,
        },
        "job": [{"name": "solo", "nodes": 1, "step_s": 2.0, "checkpoint_every_s": 1000.0}],
        "benign": [
            {
                "kind": "workload_heavier",
                "job": "solo",
                "start_s": PHASE_S,
                "duration_s": 200,
                "factor": factor,
                "power": power,
            }
        ],
    }


@cache
def run(factor: float, power: float, profile: str = "h100-sxm5-80gb") -> dict[str, Frame]:
    sim = Simulation(parse_scenario(scenario(factor, power, profile)), seed=7)
    frames: dict[str, list[Frame]] = defaultdict(list)
    for chunk in sim.chunks(seconds=10.0):
        for frame in chunk:
            frames[frame.measurement].append(frame)
    return {name: concat_frames(group) for name, group in frames.items()}


def before_after(table: Frame, field: str) -> tuple[float, float]:
    """The field's median over [30, PHASE_S) and over [PHASE_S + 30, 240) s."""
    seconds = (table.time_ns - table.time_ns.min()) / 1e9
    values = table.fields[field].astype(float)
    before = values[(seconds >= 30) & (seconds < PHASE_S)]
    after = values[seconds >= PHASE_S + 30]
    return float(np.median(before)), float(np.median(after))


def test_below_the_limit_steps_slow_power_and_heat_rise_the_clock_settles_a_little_lower() -> None:
    tables = run(1.2, 1.15)
    # compute x1.2, communication (a quarter of the step) unchanged: steps x1.15
    step_before, step_after = before_after(tables["train_step"], "step_time_seconds")
    assert 1.12 < step_after / step_before < 1.18
    compute_before, compute_after = before_after(tables["train_step"], "compute_seconds")
    assert 1.17 < compute_after / compute_before < 1.23
    gpu = tables["gpu"]
    power_before, power_after = before_after(gpu, "power_watts")
    assert 1.1 < power_after / power_before < 1.2 and power_after < 700.0
    temp_before, temp_after = before_after(gpu, "temperature_celsius")
    assert 3.0 < temp_after - temp_before < 7.0
    clock_before, clock_after = before_after(gpu, "sm_clock_mhz")
    assert 0.98 <= clock_after / clock_before < 0.997
    assert not gpu.fields["clocks_event_reasons"].any()


def test_at_the_limit_power_is_held_there_with_the_power_cap_reason() -> None:
    tables = run(1.3, 1.4, "a100-sxm4-80gb")
    gpu = tables["gpu"]
    power_before, power_after = before_after(gpu, "power_watts")
    assert power_before < 0.85 * 400.0 and 0.97 * 400.0 < power_after <= 400.0
    clock_before, clock_after = before_after(gpu, "sm_clock_mhz")
    assert 0.975 <= clock_after / clock_before < 0.99
    seconds = (gpu.time_ns - gpu.time_ns.min()) / 1e9
    reasons = gpu.fields["clocks_event_reasons"]
    assert (reasons[seconds >= PHASE_S] == SW_POWER_CAP).all()
    assert not reasons[seconds < PHASE_S].any()
    step_before, step_after = before_after(tables["train_step"], "step_time_seconds")
    assert 1.19 < step_after / step_before < 1.26  # compute x1.3 over three quarters


@pytest.mark.parametrize(
    ("factor", "power", "key"),
    [(1.0, 1.1, "factor"), (2.5, 1.1, "factor"), (1.2, 0.9, "power"), (1.2, 1.6, "power")],
)
def test_out_of_range_sizes_are_refused(factor: float, power: float, key: str) -> None:
    with pytest.raises(ScenarioError, match=rf"\[\[benign\]\] #1\.{key}"):
        parse_scenario(scenario(factor, power))
