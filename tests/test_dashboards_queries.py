"""Every dashboard query runs against the real InfluxDB, as Grafana would send it, and
returns non-empty results of the shape its panel needs: on the simulator's demo scenario with
the real flow's outputs, and on a small hand-made incident whose answers are known."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dashboards_testdata import (
    CLUSTER,
    FAULT_GPU,
    FAULT_NODE,
    JOB,
    TestOrg,
    results,
    telemetry,
    temporary_org,
)
from demo_data import load_demo
from grafana_queries import Query, all_queries, constants, dashboards, queries, render

from reflex_localize.influx.local_server import InfluxServer

pytestmark = pytest.mark.influx


@dataclass(frozen=True)
class Loaded:
    org: TestOrg
    start: datetime
    stop: datetime
    window: str
    preferred: dict[str, str]


def _moment(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, UTC)


@pytest.fixture(scope="module", params=[pytest.param("demo", marks=pytest.mark.slow), "incident"])
def loaded(request: pytest.FixtureRequest, influx: InfluxServer) -> Iterator[Loaded]:
    with temporary_org(influx) as org:
        if request.param == "demo":
            demo = load_demo(org)
            preferred = {"cluster": demo.cluster, "job": demo.critical_job}
            preferred["node"] = demo.critical_node
            start, stop = _moment(demo.start_ns), _moment(demo.stop_ns) + timedelta(seconds=10)
            yield Loaded(org, start, stop, "10s", preferred)
        else:
            now = time.time_ns()
            org.write("telemetry", telemetry(now, fault=True))
            org.write("reflex", results(now, fault=True))
            preferred = {"cluster": CLUSTER, "job": JOB, "node": FAULT_NODE}
            preferred["signal"] = "temperature_high"
            start = _moment(now) - timedelta(minutes=35)
            yield Loaded(org, start, _moment(now) + timedelta(minutes=1), "1m", preferred)


def _records(org: TestOrg, flux: str) -> list[dict[str, Any]]:
    return [dict(record.values) for table in org.query(flux) for record in table.records]


def _run(loaded: Loaded, flux: str, values: dict[str, str]) -> list[dict[str, Any]]:
    return _records(loaded.org, render(flux, values, loaded.start, loaded.stop, loaded.window))


def _variables(loaded: Loaded, board: dict[str, Any]) -> dict[str, str]:
    """Runs the board's variable queries in order, each seeing the ones before it."""
    values = constants(board)
    for variable in board["templating"]["list"]:
        if variable["type"] != "query":
            continue
        found = [row["_value"] for row in _run(loaded, variable["query"], values)]
        assert found, f"variable {variable['name']} has no values"
        preferred = loaded.preferred.get(variable["name"], "")
        values[variable["name"]] = preferred if preferred in found else found[0]
    return values


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_shape(query: Query, rows: list[dict[str, Any]]) -> None:
    assert rows, "returned nothing"
    if query.kind == "variable":
        assert all(isinstance(row["_value"], str) and row["_value"] for row in rows)
    elif query.kind == "annotation":
        for row in rows:
            assert isinstance(row["_time"], datetime), row
            assert isinstance(row["title"], str) and isinstance(row["text"], str), row
    elif query.panel_type == "timeseries":
        for row in rows:
            assert isinstance(row["_time"], datetime), row
            assert _is_number(row["_value"]), row
    elif query.panel_type in ("bargauge", "stat"):
        for row in rows:
            assert _is_number(row["_value"]), row
            labels = [k for k, v in row.items() if isinstance(v, str) and k != "result"]
            assert query.panel_type == "stat" or labels, f"unlabelled {row}"
    else:
        assert query.panel_type == "table"
        assert len(set(rows[0]) - {"result", "table"}) >= 2, rows[0]


def _message(error: Exception) -> str:
    body = getattr(error, "body", None)
    return str(body or error)[:500]


@pytest.mark.parametrize("name", sorted(dashboards()))
def test_every_query_returns_data_of_the_right_shape(loaded: Loaded, name: str) -> None:
    board = dashboards()[name]
    values = _variables(loaded, board)
    failures = []
    for query in queries(name, board):
        try:
            _check_shape(query, _run(loaded, query.flux, values))
        except Exception as error:
            failures.append(f"{query.where}: {_message(error)}")
    assert not failures, "\n".join(failures)


def _panel(name: str, title: str) -> str:
    board = dashboards()[name]
    return next(p for p in board["panels"] if p["title"] == title)["targets"][0]["query"]


def test_the_fleet_view_puts_the_faulty_node_first(loaded: Loaded) -> None:
    if "signal" not in loaded.preferred:
        pytest.skip("the answer is known only for the hand-made incident")
    values = _variables(loaded, dashboards()["fleet-overview"])
    health = _run(
        loaded, _panel("fleet-overview", "Health by node (worst component score)"), values
    )
    assert health[0]["node"] == FAULT_NODE and health[0]["index"] == FAULT_GPU
    top = _run(loaded, _panel("fleet-overview", "Top compound scores (latest)"), values)
    assert top[0]["entity"] == f"{FAULT_NODE} gpu {FAULT_GPU}"
    job_values = _variables(loaded, dashboards()["job-view"])
    title = "Step time relative to the job median (slowest first)"
    slowest = _run(loaded, _panel("job-view", title), job_values)
    assert FAULT_NODE in slowest[0]["rank"] and slowest[0]["_value"] > 1.2


def test_the_dashboards_have_queries() -> None:
    kinds = {query.kind for query in all_queries()}
    assert kinds == {"panel", "variable", "annotation"}
    assert len(all_queries()) > 40
