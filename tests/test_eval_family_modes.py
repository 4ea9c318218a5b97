"""`reflex eval --family` keeps every mode's runs in its JSON, not the first mode's alone: a
mode that gains or loses a label must be readable run by run (issue 17's learned model)."""

from __future__ import annotations

from pathlib import Path

from reflex_localize.flows.impact.model import ImpactModel
from reflex_localize.shell.eval import _run_family
from reflex_localize.shell.progress import ProgressBar

SCENARIO = Path(__file__).resolve().parent / "scenarios" / "nvlink_errors_from_start.toml"


def test_each_mode_has_its_own_runs() -> None:
    model = ImpactModel(("nvlink_error_rate",), (0.016,), 0.0)
    runs = [("reflex", "reflex", {}), ("reflex + impact", "reflex", {"impact": model})]
    summaries, by_mode, _ = _run_family("t", [SCENARIO], runs, (7,), ProgressBar(2, "t"))
    assert [s.mode for s in summaries] == ["reflex", "reflex + impact"]
    assert set(by_mode) == {"reflex", "reflex + impact"}
    # Its two faults (NVLink errors, a slower clock) are labels of one GPU: missed without
    # the model, the NVLink one named with it.
    assert {r["verdict"] for r in by_mode["reflex"]} == {"miss"}
    assert sorted(r["verdict"] for r in by_mode["reflex + impact"]) == ["hit", "miss"]
