"""Every cookbook query runs against the real InfluxDB and answers its question."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboards_testdata import (
    FAULT_GPU,
    FAULT_NODE,
    SECOND,
    TestOrg,
    events_at,
    results,
    telemetry,
    temporary_org,
)

from reflex_localize.influx.flux_literals import Duration, FluxValue, set_params
from reflex_localize.influx.local_server import InfluxServer

pytestmark = pytest.mark.influx
QUERIES = Path(__file__).resolve().parents[1] / "dashboards" / "queries"
PARAMS: dict[str, dict[str, FluxValue]] = {
    "xids_during_job": {"cluster": "c1", "job": "job-1", "start": Duration("-1h")},
    "gpu_against_baseline": {"node": FAULT_NODE, "gpu": FAULT_GPU, "start": Duration("-1h")},
    "symbol_errors_growth": {"cluster": "c1", "start": Duration("-1h")},
    "localized_this_week": {"cluster": "c1", "start": Duration("-1h")},
    "repeat_offenders": {"cluster": "c1", "start": Duration("-1h"), "min_events": 2},
}


@pytest.fixture(scope="module")
def org(influx: InfluxServer) -> Iterator[TestOrg]:
    now = time.time_ns()
    with temporary_org(influx) as made:
        made.write("telemetry", telemetry(now, fault=True))
        made.write("reflex", results(now, fault=True))
        # A second incident on the same node: a repeat offender.
        made.write("reflex", events_at(now - 600 * SECOND, fault=True, event_id="evt-0000"))
        yield made


def _run(org: TestOrg, name: str) -> list[dict[str, Any]]:
    flux = set_params((QUERIES / f"{name}.flux").read_text(), PARAMS[name])
    return [dict(record.values) for table in org.query(flux) for record in table.records]


def test_every_cookbook_query_is_listed_in_the_readme_and_tested() -> None:
    names = {path.stem for path in QUERIES.glob("*.flux")}
    assert names == set(PARAMS)
    readme = (QUERIES / "README.md").read_text()
    assert all(f"`{name}.flux`" in readme for name in names)


def test_xids_during_job(org: TestOrg) -> None:
    rows = _run(org, "xids_during_job")
    assert [(row["node"], row["code"]) for row in rows] == [(FAULT_NODE, 79), ("n01", 13)]


def test_gpu_against_baseline(org: TestOrg) -> None:
    rows = _run(org, "gpu_against_baseline")
    assert {row["signal"] for row in rows} == {"temperature_high", "power_low"}
    assert all(isinstance(row["drift_in_scales"], float) for row in rows)


def test_symbol_errors_growth(org: TestOrg) -> None:
    rows = _run(org, "symbol_errors_growth")
    assert rows[0]["node"] == FAULT_NODE
    assert rows[0]["growth"] > 0 and rows[0]["per_hour"] > 0
    assert len(rows) == 4


def test_localized_this_week(org: TestOrg) -> None:
    rows = _run(org, "localized_this_week")
    assert [row["event_id"] for row in rows] == ["evt-0001", "evt-0000"]
    assert rows[0]["suspect_node"] == FAULT_NODE


def test_repeat_offenders(org: TestOrg) -> None:
    rows = _run(org, "repeat_offenders")
    assert [(row["suspect_node"], row["events"], row["worst_severity"]) for row in rows] == [
        (FAULT_NODE, 2, 3)
    ]
