"""`reflex fit-impact`: the unlabelled impact model, learned from a fleet's own history."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from reflex_localize.flows.impact.model import ImpactModel
from reflex_localize.shell.fit_impact import command

SCENARIO = Path(__file__).resolve().parent / "scenarios" / "nvlink_errors_from_start.toml"


def test_a_fleet_whose_nvlink_errors_slow_a_rank_learns_their_cost(tmp_path: Path) -> None:
    out = tmp_path / "impact.json"
    result = CliRunner().invoke(command, ["--scenarios", str(SCENARIO), "--out", str(out)])
    assert result.exit_code == 0, result.output
    model = ImpactModel.load(out)
    cost = dict(zip(model.features, model.coefficients, strict=True))
    # The GPU's rank runs 6.5% slower with its NVLink errors at the cap of 3 units: about 2%
    # a unit (1.86% at seed 11). Eight nodes for seven minutes is a short history, and it also
    # blames the background's ECC bursts (2.4%): the model is a correlation, refit nightly.
    assert 0.005 < cost["nvlink_error_rate"] < 0.05, cost
    assert json.loads(out.read_text())["provenance"]["seed"] == 11


def test_an_unknown_family_is_named(tmp_path: Path) -> None:
    result = CliRunner().invoke(command, ["--family", "nope", "--out", str(tmp_path / "m.json")])
    assert result.exit_code == 2
    assert "no scenario family 'nope'" in result.output


def test_a_family_or_scenarios_not_both(tmp_path: Path) -> None:
    args = ["--family", "node_compound", "--scenarios", str(SCENARIO)]
    result = CliRunner().invoke(command, [*args, "--out", str(tmp_path / "m.json")])
    assert result.exit_code == 2
    assert "not both" in result.output
