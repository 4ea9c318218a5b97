"""The rows the live flow keeps for the next refit (flows/impact/rows_log.py): a refit over them
learns what a refit over the same telemetry learns, without reading InfluxDB back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from reflex_localize.flows.impact.fit import fit_impact
from reflex_localize.flows.impact.model import ImpactModel
from reflex_localize.flows.impact.rows_log import ImpactRowsLog, read_rows
from reflex_localize.flows.judge.job_step import JobConfig
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.fit_impact import command, rows_from_scenarios
from reflex_localize.shell.simulated_source import SimulatorSource

SCENARIO = Path(__file__).resolve().parent / "scenarios" / "nvlink_errors_from_start.toml"
DAY_NS = 86_400 * 10**9
JAN_1 = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z, where the simulator's clock starts


def test_a_refit_over_the_kept_rows_learns_what_the_telemetry_teaches(tmp_path: Path) -> None:
    log = ImpactRowsLog(tmp_path / "rows", "p0")
    source = SimulatorSource(str(SCENARIO), 11, 1, 10.0)
    run_in_process(source, job_config=JobConfig(impact_recorder=log))
    out = tmp_path / "impact.json"
    args = ["--rows", str(tmp_path / "rows"), "--start", "2026-01-01T00:00:00Z"]
    result = CliRunner().invoke(
        command, [*args, "--stop", "2026-01-02T00:00:00Z", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    kept = ImpactModel.load(out)
    direct = fit_impact(rows_from_scenarios([str(SCENARIO)], 11))
    assert kept.provenance["rows"] == direct.provenance["rows"] > 1000
    assert kept.features == direct.features
    cost = dict(zip(kept.features, kept.coefficients, strict=True))
    expected = dict(zip(direct.features, direct.coefficients, strict=True))
    # Rows are kept to 4 decimals of slowdown and 3 of evidence: the fit moves by as little.
    assert cost["nvlink_error_rate"] == pytest.approx(expected["nvlink_error_rate"], rel=0.02)


def test_a_replayed_window_counts_once_and_a_cut_line_is_counted(tmp_path: Path) -> None:
    log = ImpactRowsLog(tmp_path, "p0")
    log("train", JAN_1 + 10**10, [({"power_low": 1.0}, 0.05)])
    log("train", JAN_1 + 10**10, [({"power_low": 1.0}, 0.05)])  # recovery replayed it
    log("eval", JAN_1 + 10**10, [({}, 0.0)])  # another job, the same window
    [path] = tmp_path.glob("rows-2026-01-01-p0.jsonl")
    with open(path, "a") as file:
        file.write('{"t": 1767225620000000000, "job": "train", "ro')  # the process was killed
    rows, weights, unreadable = read_rows(tmp_path, JAN_1, JAN_1 + DAY_NS)
    assert sorted(zip(rows, weights, strict=True), key=lambda rw: rw[0][1]) == [
        (({}, 0.0), 1.0),
        (({"power_low": 1.0}, 0.05), 1.0),
    ]
    assert unreadable == 1


def test_days_outside_the_range_are_not_read_and_old_days_go(tmp_path: Path) -> None:
    log = ImpactRowsLog(tmp_path, "p1", keep_days=2)
    for day in range(4):
        log("train", JAN_1 + day * DAY_NS + 10**10, [({"sm_clock_low": float(day)}, 0.01)])
    assert sorted(p.name for p in tmp_path.glob("*.jsonl")) == [
        "rows-2026-01-02-p1.jsonl",
        "rows-2026-01-03-p1.jsonl",
        "rows-2026-01-04-p1.jsonl",
    ]
    rows, _, _ = read_rows(tmp_path, JAN_1 + 2 * DAY_NS, JAN_1 + 3 * DAY_NS)
    assert rows == [({"sm_clock_low": 2.0}, 0.01)]


def test_a_failed_write_is_counted_never_raised(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    log = ImpactRowsLog(blocked, "p0")
    log("train", JAN_1, [({}, 0.0)])
    log("train", JAN_1 + 10**10, [({}, 0.0)])
    assert log.failed_writes == 2


def test_rows_and_scenarios_do_not_mix(tmp_path: Path) -> None:
    args = ["--rows", str(tmp_path), "--scenarios", str(SCENARIO), "--last", "1d"]
    result = CliRunner().invoke(command, [*args, "--out", str(tmp_path / "m.json")])
    assert result.exit_code == 2 and "not both" in result.output


def test_the_kept_line_is_compact(tmp_path: Path) -> None:
    log = ImpactRowsLog(tmp_path, "p0")
    ranks = [({"sm_clock_low": 1.23456, "power_low": 0.0}, 0.0123456)]
    ranks += [({"power_low": 0.0}, 0.01), ({}, 0.02), ({}, 9.0)]  # no anomaly: counted, averaged
    log("train", JAN_1, ranks)
    [line] = next(tmp_path.glob("*.jsonl")).read_text().splitlines()
    assert json.loads(line) == {
        "t": JAN_1,
        "job": "train",
        "rows": [[0.0123, {"sm_clock_low": 1.235}]],
        "clean": [3, 1.01],  # 0.01, 0.02 and a stalled rank's 9.0 clipped to 3.0, as the fit does
    }
