"""The production source and sink against the real InfluxDB: what the simulator wrote comes
back as the same windows and the same events; late points are counted; a replayed sink batch
is stored once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import bucket_point_count, query_count
from influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS

from reflex_localize.flows.io.influx_sink import InfluxSink, event_points
from reflex_localize.flows.io.influx_source import (
    LATE_REASON,
    InfluxSource,
    InfluxSourceError,
)
from reflex_localize.flows.runner import run_in_process
from reflex_localize.influx.clock_offset import ClockOffset
from reflex_localize.influx.local_server import InfluxServer
from reflex_localize.influx.write_transport import probe_server_clock
from reflex_localize.schemas.codec import Point
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.shell.simulated_source import SimulatorSource
from reflex_localize.simulator import Simulation, load_scenario

pytestmark = pytest.mark.influx
SCENARIO, SEED, SECONDS = "fault_xid79", 7, 360  # the XID 79 hits at 300 s
WINDOW_NS = 10 * 10**9


def write_lines(server: InfluxServer, bucket: str, lines: list[str]) -> None:
    with InfluxDBClient(server.url, server.token, org=server.org, timeout=60_000) as client:
        api = client.write_api(write_options=SYNCHRONOUS)
        for i in range(0, len(lines), 5000):
            api.write(bucket, server.org, "\n".join(lines[i : i + 5000]))


def simulated_lines(seconds: int) -> tuple[list[str], int]:
    sim = Simulation(load_scenario(SCENARIO), seed=SEED)
    lines: list[str] = []
    for number, chunk in enumerate(sim.chunks(10.0)):
        if number * 10 >= seconds:
            break
        for frame in chunk:
            lines += encode_frame(frame)
    return lines, sim.start_ns


def source(server: InfluxServer, bucket: str, start: int, stop: int, **kw: object) -> InfluxSource:
    settings = server.settings(bucket)
    kw.setdefault("clock", lambda: stop + 60 * 10**9)
    return InfluxSource(settings, n_shards=3, start_ns=start, stop_ns=stop, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def simulated_bucket(influx: InfluxServer) -> tuple[str, int]:
    bucket = "flow-sim"
    influx.create_bucket(bucket)
    lines, start = simulated_lines(SECONDS)
    write_lines(influx, bucket, lines)
    return bucket, start


@pytest.mark.slow
def test_flow_over_influx_finds_what_it_finds_over_the_simulator(
    influx: InfluxServer, simulated_bucket: tuple[str, int]
) -> None:
    bucket, start = simulated_bucket
    stop = start + SECONDS * 10**9
    from_influx = run_in_process(source(influx, bucket, start, stop))
    direct = run_in_process(SimulatorSource(SCENARIO, SEED, 3, 10.0), window_seconds=10.0)
    direct_events = [e for e in direct.events if e.time_ns <= stop]
    assert [e.event_id for e in from_influx.events] == [e.event_id for e in direct_events]
    assert from_influx.events, "the XID 79 must be localized"
    top = from_influx.events[0].top
    assert top is not None and (top.node, top.component, top.index) == ("node-0006", "gpu", "3")
    assert not from_influx.errors


def test_partition_resumes_from_its_cursor_without_repeating_a_window(
    influx: InfluxServer, simulated_bucket: tuple[str, int]
) -> None:
    bucket, start = simulated_bucket
    src = source(influx, bucket, start, start + 60 * 10**9, max_windows_per_query=2)
    first = src.build_part("in", "shard-1", None)
    seen = [b.window for b in first.next_batch()]
    cursor = first.snapshot()
    assert cursor == start + 2 * WINDOW_NS and len(seen) == 2
    resumed = src.build_part("in", "shard-1", cursor)
    rest: list[int] = []
    while True:
        try:
            rest += [b.window for b in resumed.next_batch()]
        except StopIteration:
            break
    assert rest == list(range(seen[-1] + 1, seen[-1] + 5))
    first.close()
    resumed.close()


def test_a_window_waits_for_the_lag_then_late_points_are_counted(
    influx: InfluxServer, influx_bucket: str
) -> None:
    now = {"ns": 1_760_000_000 * 10**9}
    w0 = now["ns"] // WINDOW_NS * WINDOW_NS
    line = "host,cluster=c,node=n{n} load1={v} {t}"
    write_lines(influx, influx_bucket, [line.format(n=1, v=0.5, t=w0 + 10**9)])
    settings = influx.settings(influx_bucket)
    src = InfluxSource(
        settings, n_shards=1, start_ns=w0, late_check_seconds=0, clock=lambda: now["ns"]
    )
    part = src.build_part("in", "shard-0", None)
    now["ns"] = w0 + WINDOW_NS + 4 * 10**9  # the window ended, the lag has not passed
    assert part.next_batch() == [] and part.next_awake() is not None
    # Out of order and skewed, but within the lag: read with its window, not late.
    write_lines(influx, influx_bucket, [line.format(n=2, v=0.7, t=w0 + 2 * 10**9)])
    now["ns"] = w0 + WINDOW_NS + 5 * 10**9
    (batch,) = part.next_batch()
    assert batch.window == w0 // WINDOW_NS and not batch.errors
    assert sorted(batch.frames[0].tags["node"].tolist()) == ["n1", "n2"]
    # Two points for the closed window arrive after the lag; the next poll counts them.
    late = [line.format(n=n, v=0.9, t=w0 + 3 * 10**9) for n in (1, 2)]
    write_lines(influx, influx_bucket, late)
    write_lines(influx, influx_bucket, [line.format(n=1, v=0.5, t=w0 + WINDOW_NS + 10**9)])
    now["ns"] = w0 + 2 * WINDOW_NS + 5 * 10**9
    (batch,) = part.next_batch()
    assert [e.reason for e in batch.errors] == [LATE_REASON, LATE_REASON]
    assert len(batch.frames[0]) == 1  # the late points are not merged into the new window
    assert part.stats.late_points == 2
    part.close()


@pytest.mark.parametrize("measure", [True, False])
def test_a_flow_host_30_s_ahead_waits_for_influxdbs_clock(
    influx: InfluxServer, influx_bucket: str, measure: bool
) -> None:
    """Measured (production), the open window stays open and the wake-up is by this host's
    clock; unmeasured, the clock 30 s ahead reads a window whose data is still coming."""
    # Start early in a window: begun near its end, a slow first read can outlast the lag and
    # find the window really closed (a clean-clone run did).
    into = time.time_ns() % WINDOW_NS
    if into > WINDOW_NS // 2:
        time.sleep((WINDOW_NS - into) / 1e9 + 0.05)
    real_now = time.time_ns()
    w0 = real_now // WINDOW_NS * WINDOW_NS
    write_lines(influx, influx_bucket, [f"host,cluster=c,node=n1 load1=0.5 {real_now}"])
    settings = influx.settings(influx_bucket)
    src = InfluxSource(
        settings,
        n_shards=1,
        start_ns=w0,
        clock=lambda: time.time_ns() + 30 * 10**9,
        measure_server_clock=measure,
    )
    part = src.build_part("in", "shard-0", None)
    batches = part.next_batch()
    if measure:
        assert batches == []
        awake = part.next_awake()
        assert awake is not None
        # By this host's clock (30 s ahead): w0's end plus the 5 s lag, 30 s later than real.
        wait_s = awake.timestamp() - (time.time() + 30)
        assert 0 < wait_s <= 16
    else:
        assert batches and batches[0].window == w0 // WINDOW_NS  # read while still open
    part.close()


def test_a_fresh_start_reads_nothing_until_it_has_the_servers_clock(
    influx: InfluxServer, influx_bucket: str
) -> None:
    """A clock probe that times out (a busy server) is a failed attempt, retried with backoff:
    reading by a host clock 30 s ahead instead would take a window whose data is still coming."""
    into = time.time_ns() % WINDOW_NS
    if into > WINDOW_NS // 2:  # early in a window, so that the retry finds it open
        time.sleep((WINDOW_NS - into) / 1e9 + 0.05)
    real_now = time.time_ns()
    w0 = real_now // WINDOW_NS * WINDOW_NS
    write_lines(influx, influx_bucket, [f"host,cluster=c,node=n1 load1=0.5 {real_now}"])
    src = InfluxSource(
        influx.settings(influx_bucket),
        n_shards=1,
        start_ns=w0,
        clock=lambda: time.time_ns() + 30 * 10**9,
        measure_server_clock=True,
        clock_probe_timeout_s=1e-6,  # no server answers in a microsecond
    )
    part = src.build_part("in", "shard-0", None)
    assert part.next_batch() == []
    assert part.stats.failed_queries == 1 and part.next_awake() is not None
    assert src.clock_offset is not None and src.clock_offset.estimate() is None
    # The server answers again: the clock is read, and the open window stays open.
    # A further miss (a busy server) is one more counted failure and backoff, and the source
    # still reads nothing until the server answers.
    src.clock_probe_timeout_s = 10.0
    for _ in range(4):
        awake = part.next_awake()
        assert awake is not None
        time.sleep(max(0.0, awake.timestamp() - (time.time() + 30)) + 0.05)  # host 30 s ahead
        batches = part.next_batch()
        if src.clock_offset.estimate() is not None:
            break
        assert batches == []  # nothing is read by the host's clock
    # Read by the server's clock: only windows closed by now, the open one stays open.
    assert all((b.window + 1) * WINDOW_NS + src.lag_ns <= time.time_ns() for b in batches)
    if part.stats.failed_queries == 1:  # answered at the first retry
        assert batches == []
    assert src.clock_offset.estimate() is not None
    assert part.stats.failed_queries <= 4
    part.close()


def test_an_empty_hour_before_the_data_takes_a_few_queries(
    influx: InfluxServer, influx_bucket: str
) -> None:
    """A replay over an hour with data only at its end (a refit's ``--last 1h``): the span of
    a query doubles while reads come back empty, and nothing is skipped."""
    t0 = (time.time_ns() - 2 * 3600 * 10**9) // WINDOW_NS * WINDOW_NS
    stamps = [t0 + 3000 * 10**9 + i * 10**9 for i in range(0, 600, 10)]
    write_lines(influx, influx_bucket, [f"host,cluster=c,node=n1 load1=0.5 {t}" for t in stamps])
    src = InfluxSource(influx.settings(influx_bucket), n_shards=1, start_ns=t0,
                       stop_ns=t0 + 3600 * 10**9, lag_seconds=0.0)  # fmt: skip
    part = src.build_part("in", "shard-0", None)
    read: list[int] = []
    with pytest.raises(StopIteration):
        for _ in range(500):
            read += [t for b in part.next_batch() for f in b.frames for t in f.time_ns.tolist()]
    part.close()
    assert read == stamps
    # 6 windows a query would be 60 reads, each with its node and late-count queries.
    assert part.stats.queries < 100, part.stats.queries  # 56 here, 240 at 6 windows a query


def test_a_clock_probe_waits_its_timeout_in_seconds(influx: InfluxServer) -> None:
    """The client takes ``_request_timeout`` in milliseconds: a probe given seconds as they
    were waited 2 ms, and on an idle server missed most answers after the first."""
    offset = ClockOffset()
    with InfluxDBClient(influx.url, influx.token, org=influx.org) as client:
        answered = []
        for _ in range(8):
            time.sleep(0.2)
            answered.append(probe_server_clock(client, offset, 5.0))
    assert all(answered), answered
    assert offset.estimate() is not None


def test_a_wrong_token_fails_loudly(influx: InfluxServer, influx_bucket: str) -> None:
    settings = influx.settings(influx_bucket, token="not-the-token")
    src = InfluxSource(settings, n_shards=1, start_ns=0, stop_ns=10**10, clock=lambda: 10**12)
    part = src.build_part("in", "shard-0", None)
    with pytest.raises(InfluxSourceError, match="401"):
        part.next_batch()


def test_sink_replay_overwrites_instead_of_duplicating(
    influx: InfluxServer, influx_bucket: str, tmp_path: Path
) -> None:
    result = run_in_process(SimulatorSource(SCENARIO, SEED, 2, 10.0))
    (event,) = result.events
    scores = [
        Point(
            "reflex_score",
            {"cluster": "sim", "node": f"n{i}", "component": "gpu", "index": "0"},
            {"score": 0.5 + i, "top_signal": "x", "evidence": "{}", "job": "train"},
            10**18 + i,
        )
        for i in range(3)
    ]
    sink = InfluxSink(influx.settings(influx_bucket), tmp_path)
    for attempt in range(2):  # the second run is what recovery replays
        part = sink.build("event_sink", attempt, 2)
        part.write_batch([("event", event_points(event)), ("points", scores)])
    assert bucket_point_count(influx, influx_bucket, "reflex_score", "score") == 3
    assert bucket_point_count(influx, influx_bucket, "reflex_event", "event_id") == 1
    ids = query_count(
        influx,
        f'from(bucket: "{influx_bucket}") |> range(start: 0) '
        f'|> filter(fn: (r) => r._field == "event_id" and r._value == "{event.event_id}") '
        "|> count()",
    )
    assert ids == 1
