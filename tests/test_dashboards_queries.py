"""Every dashboard query runs against the real InfluxDB, as Grafana would send it, and
returns non-empty results of the shape its panel needs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dashboards_testdata import CLUSTER, FAULT_NODE, JOB, TestOrg, results, telemetry, temporary_org
from grafana_queries import Query, all_queries, constants, dashboards, queries, render

from reflex.influxdb_server import InfluxServer

pytestmark = pytest.mark.influx
WINDOW = "1m"
PREFERRED = {"cluster": CLUSTER, "job": JOB, "node": FAULT_NODE, "signal": "temperature_high"}


@pytest.fixture(scope="module")
def loaded(influx: InfluxServer) -> Iterator[tuple[TestOrg, datetime]]:
    now_ns = time.time_ns()
    with temporary_org(influx) as org:
        org.write("telemetry", telemetry(now_ns, fault=True))
        org.write("reflex", results(now_ns, fault=True))
        yield org, datetime.fromtimestamp(now_ns / 1e9, UTC)


def _records(org: TestOrg, flux: str) -> list[dict[str, Any]]:
    return [dict(record.values) for table in org.query(flux) for record in table.records]


def _variables(org: TestOrg, board: dict[str, Any], now: datetime) -> dict[str, str]:
    """Runs the board's variable queries in order, each seeing the ones before it."""
    values = constants(board)
    for variable in board["templating"]["list"]:
        if variable["type"] != "query":
            continue
        flux = render(variable["query"], values, now - timedelta(minutes=35), now, WINDOW)
        found = [row["_value"] for row in _records(org, flux)]
        assert found, f"variable {variable['name']} has no values"
        preferred = PREFERRED[variable["name"]]
        values[variable["name"]] = preferred if preferred in found else found[0]
    return values


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_shape(query: Query, rows: list[dict[str, Any]]) -> None:
    assert rows, f"{query.where} returned nothing"
    if query.kind == "variable":
        assert all(isinstance(row["_value"], str) and row["_value"] for row in rows)
    elif query.kind == "annotation":
        for row in rows:
            assert isinstance(row["_time"], datetime)
            assert isinstance(row["title"], str) and isinstance(row["text"], str), row
    elif query.panel_type == "timeseries":
        for row in rows:
            assert isinstance(row["_time"], datetime), f"{query.where}: {row}"
            assert _is_number(row["_value"]), f"{query.where}: {row}"
    elif query.panel_type in ("bargauge", "stat"):
        for row in rows:
            assert _is_number(row["_value"]), f"{query.where}: {row}"
            labels = [v for k, v in row.items() if isinstance(v, str) and k not in ("result",)]
            assert query.panel_type == "stat" or labels, f"{query.where}: unlabelled {row}"
    else:
        assert query.panel_type == "table", query.where
        assert len(row_keys := set(rows[0]) - {"result", "table"}) >= 2, row_keys


def _message(error: Exception) -> str:
    body = getattr(error, "body", None)
    return str(body or error)[:500]


@pytest.mark.parametrize("name", sorted(dashboards()))
def test_every_query_returns_data_of_the_right_shape(
    loaded: tuple[TestOrg, datetime], name: str
) -> None:
    org, now = loaded
    board = dashboards()[name]
    values = _variables(org, board, now)
    start, stop = now - timedelta(minutes=35), now + timedelta(minutes=1)
    failures = []
    for query in queries(name, board):
        try:
            _check_shape(query, _records(org, render(query.flux, values, start, stop, WINDOW)))
        except Exception as error:
            failures.append(f"{query.where}: {_message(error)}")
    assert not failures, "\n".join(failures)


def test_the_dashboards_have_queries() -> None:
    kinds = {query.kind for query in all_queries()}
    assert kinds == {"panel", "variable", "annotation"}
    assert len(all_queries()) > 40
