"""How much each benign anomaly, and each pair of them, slows a rank: learned without labels.

The fleet labels itself. Every window, each rank's compute time over its stage peers' level
(the faster half's median, as the per-step view judges it) is a residual: how much slower
the rank ran. Its features are the unweighted evidence strengths of its own GPU and of its
node's host and ports (``EvidenceBook.features``). A non-negative ridge regression over those
features and their pairwise products (solved exactly: :mod:`flows.impact_fit`) says which
anomalies, alone and together, go with a slower rank. The flow then adds evidence in
proportion to the slowdown a part's anomalies predict: several small anomalies that explain the
job's slowdown outrank one loud anomaly that slows nothing.

The model is a small JSON file with a version (a hash of its content) and its provenance,
refit on a schedule from history (``reflex fit-impact``) and loaded by the flow
(``REFLEX_IMPACT_MODEL``; ``reflex eval --impact-model``).

>>> model = ImpactModel(("a", "b", "a*b"), (0.01, 0.0, 0.02), 0.0, {})
>>> round(model.predict({"a": 1.0, "b": 2.0}), 3)
0.05
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from reflex_localize.flows.judge.step_peers import role_ratios
from reflex_localize.flows.messages import JobWindow, RankInfo
from reflex_localize.flows.signals.derive import SIGNAL_NAMES, SIGNALS, STEP_SIGNAL

IMPACT_UNIT = 0.02  # 2% of predicted slowdown adds one unit of evidence...
IMPACT_CAP = 3.0  # ...up to this much per window
MAX_PAIRS = 24  # pairwise products of the most frequent signals only (bounded model)
# A state the fleet learned slows a rank by at least this much per unit of evidence (1.5% at
# full strength) may explain a slow rank (flows/judge/explained_straggler.py), beside the states
# known to slow one. Below it the fit is noise: the library's temperature terms are 0.003%.
LEARNED_SLOWING = 0.005


@dataclass(frozen=True)
class ImpactModel:
    features: tuple[str, ...]  # signal names, and "a*b" for a pair
    coefficients: tuple[float, ...]  # slowdown (fraction) per unit of evidence strength
    intercept: float
    provenance: dict = field(default_factory=dict)

    @property
    def version(self) -> str:
        body = json.dumps([self.features, self.coefficients, self.intercept])
        return hashlib.sha256(body.encode()).hexdigest()[:12]

    def predict(self, evidence: dict[str, float]) -> float:
        """Predicted slowdown (fraction, >= 0) of a rank whose parts show this evidence."""
        total = 0.0
        for name, coefficient in zip(self.features, self.coefficients, strict=True):
            if coefficient == 0.0:
                continue
            if "*" in name:
                left, right = name.split("*", 1)
                value = evidence.get(left, 0.0) * evidence.get(right, 0.0)
            else:
                value = evidence.get(name, 0.0)
            total += coefficient * value
        return max(total, 0.0)

    def extra_evidence(self, evidence: dict[str, float]) -> float:
        return min(self.predict(evidence) / IMPACT_UNIT, IMPACT_CAP)

    def slowing_states(self, components: frozenset[str]) -> tuple[str, ...]:
        """The single signals of these components that the fleet learned slow a rank."""
        return tuple(
            name
            for name, coefficient in zip(self.features, self.coefficients, strict=True)
            if "*" not in name
            and coefficient >= LEARNED_SLOWING
            and SIGNALS[name].component in components
        )

    def save(self, path: Path) -> None:
        body = {
            "version": self.version,
            "features": list(self.features),
            "coefficients": list(self.coefficients),
            "intercept": self.intercept,
            "provenance": self.provenance,
        }
        # Written beside and renamed into place: a flow watching the file (a nightly refit
        # replacing it) reads the old model or the new one, never half of one.
        path = Path(path)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        partial.write_text(json.dumps(body, indent=2, sort_keys=True))
        os.replace(partial, path)

    @classmethod
    def load(cls, path: Path) -> ImpactModel:
        raw = json.loads(Path(path).read_text())
        features = tuple(str(f) for f in raw["features"])
        known = set(SIGNAL_NAMES)
        unknown = sorted({p for f in features for p in f.split("*")} - known)
        if unknown:
            raise ValueError(f"{path}: unknown signals {unknown}")
        model = cls(
            features,
            tuple(float(c) for c in raw["coefficients"]),
            float(raw["intercept"]),
            dict(raw.get("provenance", {})),
        )
        if raw.get("version") not in (None, model.version):
            raise ValueError(f"{path}: content does not match its version {raw['version']}")
        return model


def rank_features(
    info: RankInfo, features: dict[str, dict[str, float]], by_node: dict[str, dict[str, float]]
) -> dict[str, float]:
    """A rank's anomaly indicators: its GPU's evidence, and the strongest of its node's host
    and ports per signal (``node_features``; never its own slowness, which is predicted)."""
    out = dict(features.get(f"{info.node}|gpu|{info.gpu}", {}))
    for signal, value in by_node.get(info.node, {}).items():
        out[signal] = max(out.get(signal, 0.0), value)
    out.pop(STEP_SIGNAL, None)
    return out


def node_features(features: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per node, the strongest evidence of its host and ports per signal: once a window, not
    once a rank (a rank used to look through every entity's evidence)."""
    by_node: dict[str, dict[str, float]] = {}
    for entity, evidence in features.items():
        node, component, _ = entity.split("|")
        if component in ("host", "nic"):
            merged = by_node.setdefault(node, {})
            for signal, value in evidence.items():
                merged[signal] = max(merged.get(signal, 0.0), value)
    return by_node


def impact_rows(
    parts: list[JobWindow], members: dict[int, RankInfo], features: dict[str, dict[str, float]]
) -> list[tuple[dict[str, float], float]]:
    """(features, slowdown) per rank of one job window: the training rows."""
    ranks = np.concatenate([p.steps.rank for p in parts]) if parts else np.zeros(0, np.int64)
    if not len(ranks):
        return []
    compute = np.concatenate([p.steps.compute for p in parts])
    known = np.isfinite(compute) & (compute > 0)
    unique, inverse = np.unique(ranks[known], return_inverse=True)
    if not len(unique):
        return []
    mean = np.bincount(inverse, weights=compute[known]) / np.bincount(inverse)
    infos = [members.get(int(r)) for r in unique.tolist()]
    rows = [(i, m) for i, m in zip(infos, mean.tolist(), strict=True) if i is not None]
    if len(rows) < 4:
        return []
    groups = np.array([f"{i.pp_rank}|{i.profile}" for i, _ in rows], dtype=object)
    ratio, _ = role_ratios(np.array([m for _, m in rows]), groups, 0.02)
    by_node = node_features(features)
    return [
        (rank_features(info, features, by_node), float(r - 1.0))
        for (info, _), r in zip(rows, ratio.tolist(), strict=True)
        if np.isfinite(r)
    ]


def clipped_slowdown(slowdown: np.ndarray) -> np.ndarray:
    """A rank's slowdown as the fit takes it: a rank stalled 10x is not 10x the evidence."""
    return np.clip(slowdown, -0.5, 3.0)
