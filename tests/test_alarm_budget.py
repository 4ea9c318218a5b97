"""The false-alarm budget: each trigger's bar rises to the tail of its own statistic on this
fleet that the budget allows, never below its fixed prior, and is kept with the flow's state.
A flow run exports the bars and the realized alarm rate per trigger."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pytest
from xid79_capture import xid79_chunks

from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.judge.alarm_budget import DEFAULT_BUDGET, MIN_SAMPLES, AlarmBudget
from reflex_localize.flows.runner import run_in_process
from reflex_localize.schemas.codec import Point
from reflex_localize.shell.flow_wiring import WiringError, _alarm_budget


class Window(TypedDict):
    samples_per_window: float
    nodes: int
    window_s: float


WINDOW = Window(samples_per_window=512.0, nodes=64, window_s=10.0)


def _fed(scale: float, windows: int, seed: int = 7) -> AlarmBudget:
    budget, rng = AlarmBudget(), np.random.default_rng(seed)
    for _ in range(windows):
        budget.observe("score|nic", rng.exponential(scale, 512))
    return budget


def test_the_prior_holds_until_the_fleet_s_history_is_in() -> None:
    budget = _fed(2.0, MIN_SAMPLES // 512 - 1)
    assert budget.bar("score|nic", 3.0, **WINDOW) == 3.0


def test_a_quiet_fleet_keeps_the_prior_and_a_noisy_one_raises_the_bar() -> None:
    assert _fed(0.05, 100).bar("score|nic", 3.0, **WINDOW) == 3.0
    noisy = _fed(1.0, 100).bar("score|nic", 3.0, **WINDOW)
    # Exponential scores of scale 1: the chance of one over the bar is exp(-bar); 512 samples
    # a window, 64 nodes, 0.5 events per 1,000 node-hours allow about 1.7e-7 a sample.
    assert 13.0 < noisy < 20.0, noisy


def test_a_larger_budget_allows_a_lower_bar() -> None:
    budget = _fed(1.0, 100)
    tight = budget.bar("score|nic", 3.0, budget=0.1, **WINDOW)
    loose = budget.bar("score|nic", 3.0, budget=10.0, **WINDOW)
    assert tight > loose > 3.0


def test_the_budget_pickles_with_the_flow_s_state() -> None:
    budget = _fed(1.0, 50)
    restored = pickle.loads(pickle.dumps(budget))
    assert restored.bar("score|nic", 3.0, **WINDOW) == budget.bar("score|nic", 3.0, **WINDOW)


def test_a_flow_exports_its_bars_and_its_realized_alarm_rate(tmp_path: Path) -> None:
    capture = tmp_path / "capture.lp"
    capture.write_text("".join(line + "\n" for chunk in xid79_chunks(360) for line in chunk))
    exported: list[Point] = []

    def keep(route: str, item: Any) -> None:
        if route == "points":
            exported.extend(p for p in item if p.measurement.startswith("reflex_alarm"))

    run_in_process(LineProtocolSource(capture, 1, 10.0), on_output=keep)
    rates = {p.tags["trigger"]: p.fields for p in exported if p.measurement == "reflex_alarm_rate"}
    assert rates["all"]["events"] == rates["explicit"]["events"] == 1
    hours = rates["all"]["node_hours"]
    assert isinstance(hours, float) and 0 < hours <= 64 * 360 / 3600
    assert rates["explicit"]["rate_per_1k_node_hours"] == 1000 / hours
    bars = [p.fields for p in exported if p.measurement == "reflex_alarm_bar"]
    assert bars and all(float(f["bar"]) >= float(f["prior"]) for f in bars)


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "lots"])
def test_a_budget_that_is_no_positive_number_is_refused(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv("REFLEX_ALARM_BUDGET", text)
    with pytest.raises(WiringError, match="REFLEX_ALARM_BUDGET"):
        _alarm_budget()


def test_the_budget_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFLEX_ALARM_BUDGET", "2.5")
    assert _alarm_budget() == 2.5
    monkeypatch.delenv("REFLEX_ALARM_BUDGET")
    assert _alarm_budget() == DEFAULT_BUDGET
