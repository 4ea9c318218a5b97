"""Evidence weights refit by ``reflex fit``, as a file the flow loads at start.

The file holds one weight per signal (``FEATURES``); the flow applies them to every
hardware profile on top of the profile's defaults.
"""

from __future__ import annotations

import json
from pathlib import Path

from reflex_localize.flows.judge.job_step import default_weights
from reflex_localize.flows.signals.derive import SIGNAL_NAMES, STEP_SIGNAL

FEATURES = (*SIGNAL_NAMES, STEP_SIGNAL)


def save_weights(weights: dict[str, float], path: Path, provenance: dict) -> None:
    path.write_text(
        json.dumps({"weights": weights, "provenance": provenance}, indent=2, sort_keys=True)
    )


def load_weights(path: Path) -> dict[str, dict[str, float]]:
    """Refit weights as the flow takes them: the same per-signal weights for every profile."""
    raw = json.loads(Path(path).read_text())
    fitted = {str(k): float(v) for k, v in raw["weights"].items()}
    unknown = set(fitted) - set(FEATURES)
    if unknown:
        raise ValueError(f"{path}: unknown signals {sorted(unknown)}")
    return {profile: {**defaults, **fitted} for profile, defaults in default_weights().items()}
