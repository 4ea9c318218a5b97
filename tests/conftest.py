"""Shared fixtures: one real InfluxDB 2.x per test session, a fresh bucket per test.

- ``influx`` (session): a running :class:`~influx.local_server.InfluxServer` with org
  ``reflex`` and buckets ``telemetry`` and ``reflex``. The binary comes from $REFLEX_INFLUXD or
  the cached build, and is built (about 8 min cold here) if neither exists. Tests must not stop it
  unless they start it again before returning.
- ``influx_bucket`` (function): the name of a new, empty bucket on ``influx``, deleted after.
- ``query_count(server, flux)`` and ``query_rows(server, flux)``: helpers for assertions.

Under pytest-xdist (``make test`` runs ``-n 3 --dist loadfile --no-loadscope-reorder``) each
worker has its own ``influx``, and each test file runs whole on one worker, in order: the fuzz
modules' last tests check tallies the earlier ones kept. Files are handed out in collection
order, those with a slow test first (``pytest_collection_modifyitems``). (``--dist loadgroup``
would group finer, but pytest-xdist 3.8 cannot regroup items under pytest 9.2: it renames
``item._nodeid``, which 9.2 ignores.)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reflex_localize.influx.local_server import InfluxServer, start_influxdb

# Helper modules beside the tests (a fault proxy, shared data) are imported by tests, not
# collected as tests themselves (--doctest-modules would collect each one).
collect_ignore = sorted(
    path.name
    for path in Path(__file__).parent.glob("*.py")
    if not path.name.startswith("test_") and path.name != "conftest.py"
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files with a slow test run first, each file still whole and in its own order: xdist
    hands files out in this order, and a three-minute file handed out last kept one worker
    busy while the other had nothing left."""
    slow_files = {
        item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("slow")
    }
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (item.nodeid.split("::", 1)[0] not in slow_files, order[id(item)]))


# Flux's range() stops at now() unless told otherwise; test data may lie in the future.
ALL_TIME = "range(start: 0, stop: 2262-04-11T23:47:16.854775807Z)"


@pytest.fixture(scope="session")
def influx() -> Iterator[InfluxServer]:
    with start_influxdb() as server:
        yield server


@pytest.fixture
def influx_bucket(influx: InfluxServer) -> Iterator[str]:
    name = f"test-{uuid.uuid4().hex[:12]}"
    influx.create_bucket(name)
    yield name
    if influx.running:
        influx.delete_bucket(name)


def query_rows(server: InfluxServer, flux: str) -> list[dict[str, Any]]:
    """Every record of a Flux query, all tables flattened."""
    return server.query_rows(flux)


def query_count(server: InfluxServer, flux: str) -> int:
    """Sums the ``_value`` of every record: pipe a query into ``count()`` and pass it here.

    Tables are grouped by series, so a plain ``count()`` gives one row per series and field;
    summing them gives the number of stored field values.
    """
    return int(sum(row["_value"] for row in server.query_rows(flux)))


def bucket_point_count(server: InfluxServer, bucket: str, measurement: str, field: str) -> int:
    """Stored points of one measurement (counted through one field every point carries)."""
    return query_count(
        server,
        f'from(bucket: "{bucket}") |> {ALL_TIME} '
        f'|> filter(fn: (r) => r._measurement == "{measurement}" and r._field == "{field}") '
        "|> count()",
    )
