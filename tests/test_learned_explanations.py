"""A state the fleet learned slows a rank explains a rank slow from the job's first step.

The explained-straggler rule (flows/judge/explained_straggler.py) knows a fixed list of states that
slow a rank; NVLink CRC errors are not on it, since most links that show a few slow nothing.
A fleet whose own history (the unlabelled impact model, flows/impact/model.py) says that they
do cost its ranks can tell such a rank, and only where what the part shows predicts at least
half of the rank's excess. Before, `node_compound`'s from-the-start compound (written apart
from the detector) was missed in every mode with every model: 0 of 3 runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_localize.flows.impact.model import ImpactModel
from reflex_localize.flows.judge.explained_straggler import (
    explaining_part,
    learned_enough,
    learned_slowing,
)
from reflex_localize.flows.judge.job_evidence import SLOWING_STATES
from reflex_localize.flows.judge.job_step import JobConfig
from reflex_localize.flows.judge.step_peers import StepFinding
from reflex_localize.flows.messages import RankInfo
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

SCENARIO = Path(__file__).resolve().parent / "scenarios" / "nvlink_errors_from_start.toml"


def _nvlink(per_unit: float) -> ImpactModel:
    return ImpactModel(("nvlink_error_rate", "temperature_high"), (per_unit, 0.02), 0.0)


def _told(model: ImpactModel | None, mode: str = "reflex") -> list[tuple[str, str, str, str]]:
    events = run_in_process(
        SimulatorSource(str(SCENARIO), 7, 1, 10.0), job_config=JobConfig(mode=mode, impact=model)
    ).events
    return [(e.trigger, e.top.node, e.top.component, e.top.index) for e in events if e.top]


def test_without_a_model_nvlink_errors_explain_nothing() -> None:
    assert _told(None) == []


def test_a_fleet_that_learned_nvlink_errors_cost_tells_the_rank() -> None:
    events = run_in_process(
        SimulatorSource(str(SCENARIO), 7, 1, 10.0), job_config=JobConfig(impact=_nvlink(0.016))
    ).events
    assert [(e.trigger, e.top.node, e.top.index) for e in events if e.top] == [
        ("straggler", "node-0004", "2")
    ]
    assert "nvlink_error_rate on its gpu stands" in events[0].summary
    assert "learned impact model" in events[0].summary
    assert "4.8% slower" in events[0].summary  # 0.016 per unit, at the cap of 3 units


@pytest.mark.parametrize(
    ("per_unit", "why"),
    [(0.004, "under LEARNED_SLOWING: noise"), (0.008, "predicts 2.4%, under half of 6%")],
)
def test_a_weak_learned_cost_explains_nothing(per_unit: float, why: str) -> None:
    assert _told(_nvlink(per_unit)) == [], why


def test_the_ablations_do_not_use_the_model() -> None:
    assert _told(_nvlink(0.016), mode="peer_only") == _told(None, mode="peer_only")


def test_learned_states_are_gpu_and_host_states_over_the_floor() -> None:
    features = ("nvlink_error_rate", "nic_symbol_error_rate", "disk_busy", "ecc_corrected_rate")
    model = ImpactModel(
        (*features, "sm_clock_low", "power_low", "nvlink_error_rate*disk_busy"),
        (0.016, 0.05, 0.02, 0.001, 0.15, 0.16, 0.5),
        0.0,
    )
    assert learned_slowing(model) == (*SLOWING_STATES, "nvlink_error_rate")
    assert learned_slowing(None) is SLOWING_STATES


def test_a_learned_state_must_cover_half_the_excess() -> None:
    members = {3: RankInfo(3, "n2", 3, 0, 3, 0, 1, "h100")}
    slow = [StepFinding("marginal", 3, 1.09, steps=9, since_ns=0)]
    held = {("n2|gpu|3", "nvlink_error_rate"): (10 * 10**9, 40.0)}
    model = _nvlink(0.016)

    def found(strength: float) -> str | None:
        features = {"n2|gpu|3": {"nvlink_error_rate": strength, "step_time_slow": 3.0}}
        enough = learned_enough(model, features)
        got = explaining_part(slow, members, held, 400 * 10**9, 10 * 10**9, enough)
        return None if got is None else got.signal

    assert found(3.0) == "nvlink_error_rate"  # 4.8% predicted of a 9% excess
    assert found(2.0) is None  # 3.2% of 9%: under half


def test_a_known_slowing_state_needs_no_model_to_agree() -> None:
    members = {3: RankInfo(3, "n2", 3, 0, 3, 0, 1, "h100")}
    slow = [StepFinding("marginal", 3, 1.10, steps=9, since_ns=0)]
    held = {("n2|host|-", "disk_busy"): (10 * 10**9, 18.0)}
    enough = learned_enough(_nvlink(0.016), {})
    got = explaining_part(slow, members, held, 400 * 10**9, 10 * 10**9, enough)
    assert got is not None and got.signal == "disk_busy"
