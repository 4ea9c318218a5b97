"""The writer against the real InfluxDB 2.x: round trips, an outage, a crash, rejections."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import ALL_TIME, bucket_point_count, query_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS
from test_codec import valid_points

from reflex_localize.influx.local_server import InfluxServer, free_port
from reflex_localize.influx.writer import Writer, WriterAuthError, WriterConfigError
from reflex_localize.schemas.codec import Point, validate
from reflex_localize.schemas.contract import load_schema
from reflex_localize.shell.sample_points import sample_points

pytestmark = pytest.mark.influx
REPO = Path(__file__).resolve().parents[1]


def make_writer(server: InfluxServer, bucket: str, spool: Path, **options: Any) -> Writer:
    return Writer(server.url, server.token, server.org, bucket, spool, **options)


def step_point(step: int) -> Point:
    tags = {"cluster": "c1", "job": "j1", "node": f"n{step % 4}", "rank": str(step % 4)}
    fields = {"step": step, "step_time_seconds": 0.5}
    return Point("train_step", tags, fields, 1_700_000_000_000_000_000 + step * 1000)


def read_back(server: InfluxServer, bucket: str) -> set[tuple[Any, ...]]:
    """Every stored point as (measurement, tags, fields, time_ns), rebuilt from Flux rows."""
    rows = query_rows(
        server,
        f'from(bucket: "{bucket}") |> {ALL_TIME} '
        "|> map(fn: (r) => ({r with time_ns: int(v: r._time)}))",
    )
    schema = load_schema()
    points: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        measurement = row["_measurement"]
        tags = tuple(sorted((t, row[t]) for t in schema.measurement(measurement).tags))
        # Flux's CSV cannot tell an empty string from a null; the client gives None.
        value = "" if row["_value"] is None else row["_value"]
        points.setdefault((measurement, tags, row["time_ns"]), {})[row["_field"]] = value
    return {
        (measurement, tags, tuple(sorted(fields.items())), time_ns)
        for (measurement, tags, time_ns), fields in points.items()
    }


def as_key(point: Point) -> tuple[Any, ...]:
    point = validate(point)
    return (
        point.measurement,
        tuple(sorted(point.tags.items())),
        tuple(sorted(point.fields.items())),
        point.time_ns,
    )


def test_every_measurement_family_round_trips(influx, influx_bucket, tmp_path):
    points = sample_points(per_measurement=3)
    with make_writer(influx, influx_bucket, tmp_path) as writer:
        writer.write(points)
        assert writer.flush()
    assert writer.stats.sent == len(points) and writer.stats.rejected == 0
    assert read_back(influx, influx_bucket) == {as_key(p) for p in points}


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(valid_points().filter(lambda p: p.time_ns < 2**62), min_size=1, max_size=20))
def test_random_valid_points_survive_the_real_server(influx, tmp_path_factory, points):
    # InfluxDB escapes differently from textbooks (a backslash in a tag is literal): only the
    # real server can say whether the codec's escaping agrees with it.
    bucket = f"rt-{uuid.uuid4().hex[:10]}"
    influx.create_bucket(bucket)
    try:
        with make_writer(influx, bucket, tmp_path_factory.mktemp("spool")) as writer:
            writer.write(points)
        assert writer.stats.rejected == 0, writer.stats.rejected_by_reason
        expected = {as_key(p) for p in merged(points)}
        assert read_back(influx, bucket) == expected
    finally:
        influx.delete_bucket(bucket)


def merged(points: list[Point]) -> list[Point]:
    """What InfluxDB keeps: one point per series and time, later fields overwriting earlier."""
    kept: dict[tuple[Any, ...], Point] = {}
    for p in points:
        key = (p.measurement, tuple(sorted(p.tags.items())), p.time_ns)
        old = kept.get(key)
        fields = {**old.fields, **p.fields} if old else dict(p.fields)
        kept[key] = Point(p.measurement, p.tags, fields, p.time_ns)
    return list(kept.values())


def test_lines_of_line_protocol_are_accepted_too(influx, influx_bucket, tmp_path):
    lines = ["host,cluster=c,node=n\\ 1 load1=0.5,procs_running=3i 1000"]
    with make_writer(influx, influx_bucket, tmp_path) as writer:
        writer.write(lines)
    assert bucket_point_count(influx, influx_bucket, "host", "load1") == 1


def test_a_ten_second_outage_mid_stream_loses_nothing(influx, influx_bucket, tmp_path):
    def pull_the_plug() -> None:
        time.sleep(1.0)
        influx.stop()
        time.sleep(10.5)
        influx.start()

    outage = threading.Thread(target=pull_the_plug)
    writer = make_writer(influx, influx_bucket, tmp_path, batch_size=200, max_buffer_points=1000)
    total, started = 0, time.monotonic()
    outage.start()
    try:
        while time.monotonic() - started < 14.0:
            writer.write(step_point(total + i) for i in range(100))
            total += 100
            time.sleep(0.05)
    finally:
        outage.join()
        delivered = writer.close(wait_s=60)
    assert delivered
    assert writer.stats.retried > 0 and writer.stats.spooled > 0, writer.stats
    assert bucket_point_count(influx, influx_bucket, "train_step", "step") == total


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, {repo!r}); sys.path.insert(0, {tests!r})
    from test_writer_influx import step_point
    from reflex_localize.influx.writer import Writer

    writer = Writer({url!r}, "token", "reflex", "nowhere", Path({spool!r}), batch_size=100)
    step = 0
    while True:
        writer.write(step_point(step + i) for i in range(100))
        step += 100
        writer.flush(wait_s=0)  # nobody listens at url: everything goes to the spool
        print("durable", step, flush=True)
    """
)


def test_a_writer_killed_while_spooling_loses_nothing(influx, influx_bucket, tmp_path):
    spool = tmp_path / "spool"
    code = CHILD.format(
        repo=str(REPO),
        tests=str(REPO / "tests"),
        url=f"http://127.0.0.1:{free_port()}",
        spool=str(spool),
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    durable = 0
    try:
        assert child.stdout is not None
        for line in child.stdout:
            durable = int(line.split()[1])
            if durable >= 3000:
                break
        os.kill(child.pid, signal.SIGKILL)  # while it keeps writing and spooling
    finally:
        child.kill()
        child.wait(timeout=10)
    assert durable >= 3000
    with make_writer(influx, influx_bucket, spool) as writer:
        assert writer.flush()
    stored = bucket_point_count(influx, influx_bucket, "train_step", "step")
    top = query_rows(
        influx,
        f'from(bucket: "{influx_bucket}") |> {ALL_TIME} '
        '|> filter(fn: (r) => r._field == "step") |> group() |> max()',
    )[0]["_value"]
    assert stored >= durable
    assert stored == top + 1  # a gap-free prefix: the spool kept its order


def test_a_point_the_server_rejects_is_counted_not_retried(influx, influx_bucket, tmp_path):
    # Make load1 an integer field in this bucket, so a (declared) float load1 conflicts.
    with InfluxDBClient(influx.url, influx.token, org=influx.org, timeout=10_000) as client:
        client.write_api(write_options=SYNCHRONOUS).write(
            influx_bucket, record="host,cluster=c,node=other load1=5i 1"
        )
    good = [Point("host", {"cluster": "c", "node": "n"}, {"procs_running": i}, i) for i in range(9)]
    bad = Point("host", {"cluster": "c", "node": "n"}, {"load1": 0.5}, 100)
    started = time.monotonic()
    with make_writer(influx, influx_bucket, tmp_path) as writer:
        writer.write([*good[:4], bad, *good[4:]])
        assert writer.flush(wait_s=30)
    assert time.monotonic() - started < 10
    assert writer.stats.rejected == 1 and writer.stats.retried == 0, writer.stats
    [reason] = writer.stats.rejected_by_reason
    assert "load1" in reason and "HTTP 422" in reason
    assert bucket_point_count(influx, influx_bucket, "host", "procs_running") == 9


def test_invalid_points_are_counted_by_reason_and_the_rest_land(influx, influx_bucket, tmp_path):
    tags = {"cluster": "c", "node": "n"}
    points: list[Point | str] = [
        Point("host", tags, {"load1": float("nan")}, 1),
        Point("host", tags, {"load_42": 1.0}, 2),
        "host,cluster=c,node=n load1=oops 3",
        Point("host", tags, {"load1": 1.0}, 4),
    ]
    with make_writer(influx, influx_bucket, tmp_path) as writer:
        writer.write(points)
    reasons = writer.stats.rejected_by_reason
    assert writer.stats.rejected == 3, reasons
    assert any(r.startswith("host.load1:") and "not finite" in r for r in reasons)
    assert any(r.startswith("host.load_42:") and "undeclared field" in r for r in reasons)
    assert bucket_point_count(influx, influx_bucket, "host", "load1") == 1


def test_a_wrong_token_fails_loudly_keeps_the_points_and_never_shows_the_token(
    influx, influx_bucket, tmp_path, caplog
):
    secret = "wrong-token-s3cr3t-value"
    caplog.set_level(logging.DEBUG)
    writer = Writer(influx.url, secret, influx.org, influx_bucket, tmp_path)
    writer.write([step_point(1)])
    with pytest.raises(WriterAuthError) as raised:
        writer.flush()
    assert "401" in str(raised.value)
    assert not writer.spool_empty  # not lost: it waits for a right token
    with pytest.raises(WriterAuthError):
        writer.close(wait_s=0)
    for text in (str(raised.value), repr(writer), caplog.text):
        assert secret not in text


def test_a_missing_bucket_is_a_configuration_error(influx, tmp_path):
    writer = make_writer(influx, "no-such-bucket", tmp_path)
    writer.write([step_point(1)])
    with pytest.raises(WriterConfigError):
        writer.flush()
