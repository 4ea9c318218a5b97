"""The downsampling tasks, run by hand in the real InfluxDB, keep scores and baselines in the
long-retention bucket at a coarser resolution."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from alert_runs import install_into, run_task
from dashboards_testdata import FAULT_GPU, FAULT_NODE, NODES, TestOrg, results, temporary_org

from reflex_localize.dashboards.alerts import AlertSettings
from reflex_localize.influx.local_server import InfluxServer

pytestmark = pytest.mark.influx


@pytest.fixture(scope="module")
def org(influx: InfluxServer) -> Iterator[TestOrg]:
    with temporary_org(influx) as made:
        made.write("reflex", results(time.time_ns(), fault=True, minutes=30))
        tasks = install_into(made, AlertSettings("https://hooks.example.com/x"))
        for name in ("reflex-downsample-scores", "reflex-downsample-baselines"):
            status, logs = run_task(made, tasks[name])
            assert status == "success", logs
        yield made


def _rows(org: TestOrg, measurement: str, bucket: str) -> list[dict[str, Any]]:
    flux = (
        f'from(bucket: "{bucket}") |> range(start: -2h, stop: 2h)'
        f' |> filter(fn: (r) => r._measurement == "{measurement}")'
    )
    return [dict(record.values) for table in org.query(flux) for record in table.records]


def test_scores_keep_the_worst_value_per_five_minutes(org: TestOrg) -> None:
    raw = _rows(org, "reflex_score", "reflex")
    kept = _rows(org, "reflex_score", "reflex_downsampled")
    scores = [row for row in kept if row["_field"] == "score"]
    assert 0 < len(scores) <= len([row for row in raw if row["_field"] == "score"]) / 5
    assert {row["_field"] for row in kept} == {"score", "top_signal", "job"}
    worst_raw = max(row["_value"] for row in raw if row["_field"] == "score")
    worst_kept = max(scores, key=lambda row: row["_value"])
    assert worst_kept["_value"] == worst_raw
    assert (worst_kept["node"], worst_kept["index"]) == (FAULT_NODE, FAULT_GPU)


def test_baselines_keep_the_last_value_per_hour(org: TestOrg) -> None:
    kept = _rows(org, "reflex_baseline", "reflex_downsampled")
    assert {row["_field"] for row in kept} == {"center", "scale", "count"}
    centers = [row for row in kept if row["_field"] == "center"]
    series = {(row["node"], row["index"], row["signal"]) for row in centers}
    assert len(series) == len(NODES) * 2 * 2
    assert len(centers) <= 2 * len(series)  # the 30 minutes span at most two hours
