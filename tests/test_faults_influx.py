"""The Writer against a misbehaving InfluxDB: the real influxd behind tests/fault_proxy.py.

The proxy answers slowly (past the client's timeout, so the batch may land and be resent),
returns 500, returns 429 with Retry-After, and closes the connection mid-batch or after the
server stored the batch. Whatever it does: every point lands exactly once (counted with Flux)
and the writer's memory (``backlog``) never exceeds ``max_buffer_points``.

A spool smaller than the outage: the writer logs "spool full" at ERROR, keeps the newest
points (the documented policy: the oldest spool segment goes first) and counts what it dropped
in ``stats.dropped_spool_full``; what it kept lands.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ALL_TIME, bucket_point_count, query_rows
from fault_proxy import FaultProxy

from reflex_localize.influx.local_server import InfluxServer
from reflex_localize.influx.writer import Writer
from reflex_localize.schemas.codec import Point

pytestmark = [pytest.mark.influx, pytest.mark.slow]
START_NS = 1_700_000_000_000_000_000


def host_point(index: int) -> Point:
    tags = {"cluster": "faults", "node": f"n{index % 10}"}
    return Point("host", tags, {"load1": index / 100.0}, START_NS + index * 1_000_000)


@pytest.fixture
def proxy(influx: InfluxServer) -> Iterator[FaultProxy]:
    with FaultProxy(influx.url) as fault_proxy:
        yield fault_proxy


def test_misbehaving_influx_loses_nothing_duplicates_nothing(
    influx: InfluxServer, influx_bucket: str, proxy: FaultProxy, tmp_path: Path
) -> None:
    total, batch, bound = 20_000, 500, 2_000
    proxy.script.extend(
        [
            "pass",
            500,
            (429, 1.0),
            "cut",
            ("slow", 0.3),
            "cut_after",
            ("slow", 2.5),  # past the 1 s timeout: given up on, stored anyway, sent again
            500,
            "pass",
            (429, 0.5),
            "cut",
            "cut_after",
        ]
    )
    writer = Writer(
        proxy.url,
        influx.token,
        influx.org,
        influx_bucket,
        tmp_path / "spool",
        batch_size=batch,
        max_buffer_points=bound,
        timeout_s=1.0,
    )
    started = time.monotonic()
    peak = 0
    for first in range(0, total, 1000):
        writer.write(host_point(i) for i in range(first, first + 1000))
        peak = max(peak, writer.backlog)
        assert writer.backlog <= bound
    assert writer.close(wait_s=120), "the writer could not deliver everything in 120 s"
    elapsed = time.monotonic() - started
    stored = bucket_point_count(influx, influx_bucket, "host", "load1")
    times = query_rows(
        influx,
        f'from(bucket: "{influx_bucket}") |> {ALL_TIME} |> filter(fn: (r) => r._field == "load1")'
        ' |> group() |> count(column: "_value")',
    )
    print(
        f"faults: {dict(proxy.seen)}; {total} points, {stored} stored, "
        f"{writer.stats.sent} acknowledged sends, {writer.stats.retried} retried requests, "
        f"{writer.stats.spooled} spooled, peak backlog {peak} (bound {bound}), {elapsed:.1f} s"
    )
    assert stored == total  # nothing lost, and InfluxDB holds no second copy of any point
    assert times[0]["_value"] == total
    assert writer.stats.rejected == 0
    assert writer.stats.retried >= 8
    assert {"500", "429", "cut", "cut_after", "slow"} <= set(proxy.seen)


def test_full_spool_keeps_newest_and_counts_drops(
    influx: InfluxServer,
    influx_bucket: str,
    proxy: FaultProxy,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    total, spool_bytes = 20_000, 256 << 10
    proxy.fail_all = True  # InfluxDB "down" for the whole write
    writer = Writer(
        proxy.url,
        influx.token,
        influx.org,
        influx_bucket,
        tmp_path / "spool",
        batch_size=500,
        max_buffer_points=1_000,
        max_spool_bytes=spool_bytes,
        timeout_s=1.0,
    )
    with caplog.at_level(logging.ERROR, logger="reflex"):
        for first in range(0, total, 1000):
            writer.write(host_point(i) for i in range(first, first + 1000))
        assert not writer.flush(wait_s=0)
    dropped = writer.stats.dropped_spool_full
    assert dropped > 0
    assert any("spool full" in record.getMessage() for record in caplog.records)
    spool_size = sum(p.stat().st_size for p in (tmp_path / "spool").glob("segment-*"))
    assert spool_size <= spool_bytes
    proxy.fail_all = False
    assert writer.close(wait_s=60)
    stored = bucket_point_count(influx, influx_bucket, "host", "load1")
    oldest = query_rows(
        influx,
        f'from(bucket: "{influx_bucket}") |> {ALL_TIME} |> filter(fn: (r) => r._field == "load1")'
        " |> group() |> min() |> map(fn: (r) => ({r with i: int(v: r._value * 100.0 + 0.5)}))",
    )[0]["i"]
    print(
        f"full spool: {total} points during an outage, spool max {spool_bytes} bytes: "
        f"{dropped} dropped (counted), {stored} kept and delivered, oldest kept #{oldest}"
    )
    assert stored + dropped == total  # every point is delivered or counted as dropped
    assert oldest == dropped  # the newest points are the ones kept
