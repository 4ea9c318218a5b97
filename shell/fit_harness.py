"""`reflex fit`: evidence weights refit with scikit-learn from labelled incidents.

Examples are (entity, window) pairs with their unweighted evidence per signal, as the flow
computes it. Labels come from the simulator's ground truth (the faulty entity during its
fault is positive, every other entity with evidence is negative) or from an operator's
verdicts on past events (a confirmed event's top suspect is positive, a rejected one
negative). A logistic regression with balanced classes learns how much each signal tells a
fault from benign noise; its positive coefficients, rescaled to the default weights' mean,
become the new weights. Signals it finds uninformative keep a small floor rather than zero,
so a signal unseen in training can still add evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.judge.job_step import JobConfig, default_weights
from reflex_localize.flows.judge.weights import FEATURES
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

WEIGHT_FLOOR = 0.05


@dataclass
class TrainingSet:
    rows: list[np.ndarray] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)

    def add(self, evidence: dict[str, float], label: int) -> None:
        self.rows.append(np.array([evidence.get(name, 0.0) for name in FEATURES]))
        self.labels.append(label)


def _is_faulty(entity: str, label: Any, time_ns: int) -> bool:
    node, component, index = entity.split("|")
    if label.expect != "hardware" or not label.onset_ns <= time_ns <= label.end_ns:
        return False
    if node != label.node:
        return False
    if label.component in ("node", "none", ""):
        return True
    return component == label.component and (not label.index or index == label.index)


def examples_from_scenario(scenario: str, seed: int, data: TrainingSet) -> None:
    """Runs the flow on a scenario and labels every entity-window that carried evidence."""
    from reflex_localize.simulator import Simulation, load_scenario

    truth = Simulation(load_scenario(scenario), seed=seed).truth

    def record(job: str, end_ns: int, features: dict[str, dict[str, float]]) -> None:
        for entity, evidence in features.items():
            faulty = any(_is_faulty(entity, label, end_ns) for label in truth)
            data.add(evidence, int(faulty))

    run_in_process(SimulatorSource(scenario, seed, 1, 10.0), job_config=JobConfig(recorder=record))


def examples_from_feedback(
    events: list[LocalizationEvent], verdicts: dict[str, str], data: TrainingSet
) -> int:
    """Operator verdicts ("confirmed" / "rejected") on past events' top suspects."""
    weights = default_weights()
    used = 0
    for event in events:
        verdict = verdicts.get(event.event_id)
        top = event.top
        if verdict not in ("confirmed", "rejected") or top is None:
            continue
        profile_weights = next(iter(weights.values()))
        evidence = {
            e.signal: e.weight / max(profile_weights.get(e.signal, 1.0), 1e-6)
            for e in top.evidence
            if e.signal in FEATURES
        }
        data.add(evidence, int(verdict == "confirmed"))
        used += 1
    return used


def fit_weights(data: TrainingSet, seed: int = 0) -> dict[str, float]:
    """Per-signal weights from a balanced logistic regression on the examples."""
    labels = np.array(data.labels)
    if len(set(labels.tolist())) < 2:
        raise ValueError("need both faulty and healthy examples to fit weights")
    x = np.vstack(data.rows)
    model = LogisticRegression(class_weight="balanced", C=1.0, max_iter=2000, random_state=seed)
    model.fit(x, labels)
    coefficients = np.clip(model.coef_[0], 0.0, None)
    defaults = next(iter(default_weights().values()))
    target_mean = float(np.mean([defaults.get(name, 1.0) for name in FEATURES]))
    scale = target_mean / coefficients.mean() if coefficients.mean() > 0 else 1.0
    return {
        name: round(max(float(c * scale), WEIGHT_FLOOR), 4)
        for name, c in zip(FEATURES, coefficients, strict=True)
    }
