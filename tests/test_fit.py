"""`reflex fit`: weights learned from labelled incidents, and used by the flow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reflex_localize.flows.incidents.events import Evidence, LocalizationEvent, Suspect
from reflex_localize.flows.judge.job_step import JobConfig
from reflex_localize.flows.judge.weights import FEATURES, load_weights, save_weights
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.fit_harness import (
    TrainingSet,
    examples_from_feedback,
    examples_from_scenario,
    fit_weights,
)
from reflex_localize.shell.simulated_source import SimulatorSource


@pytest.fixture(scope="module")
def training() -> TrainingSet:
    data = TrainingSet()
    for scenario in ("fault_fail_slow_gpu", "fault_ib_flapping"):
        examples_from_scenario(scenario, 11, data)
    return data


def test_ground_truth_labels_both_classes(training: TrainingSet) -> None:
    assert 0 < sum(training.labels) < len(training.labels)


def test_fitted_weights_favour_the_signals_of_real_faults(training: TrainingSet) -> None:
    weights = fit_weights(training)
    assert set(weights) == set(FEATURES)
    assert all(w > 0 for w in weights.values())
    # The fail-slow GPU shows as a low clock, the flapping port as link recoveries or symbol
    # errors; benign background shows as short thermal throttles.
    assert weights["sm_clock_low"] > weights["throttle_thermal"]


def test_flow_uses_refit_weights(training: TrainingSet, tmp_path: Path) -> None:
    path = tmp_path / "weights.json"
    save_weights(fit_weights(training), path, {"test": True})
    config = JobConfig()
    config.weights = load_weights(path)
    fitted = json.loads(path.read_text())["weights"]["sm_clock_low"]
    assert all(w["sm_clock_low"] == fitted for w in config.weights.values())
    result = run_in_process(SimulatorSource("fault_fail_slow_gpu", 7, 1, 10.0), job_config=config)
    assert result.events and result.events[0].suspects[0].node == "node-0006"


def test_operator_verdicts_move_the_weights() -> None:
    def event(event_id: str, signal: str) -> LocalizationEvent:
        suspect = Suspect("n1", "gpu", "0", 5.0, [Evidence(signal, 6.0, 6.0, 1.0, 0)])
        return LocalizationEvent(
            event_id, 0, "c", "j", "regression", "warning", 0.9, [suspect], "a", "s"
        )

    events = [event(f"c{i}", "pcie_replay_rate") for i in range(20)]
    events += [event(f"r{i}", "temperature_high") for i in range(20)]
    verdicts = {e.event_id: "confirmed" if e.event_id[0] == "c" else "rejected" for e in events}
    data = TrainingSet()
    assert examples_from_feedback(events, verdicts, data) == 40
    weights = fit_weights(data)
    assert weights["pcie_replay_rate"] > weights["temperature_high"]


def test_unknown_signal_in_a_weights_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "weights.json"
    path.write_text(json.dumps({"weights": {"gpu_vibes": 1.0}}))
    with pytest.raises(ValueError, match="gpu_vibes"):
        load_weights(path)
