"""The push source against the real InfluxDB and real Bytewax: simulated collectors write into a
bucket, InfluxDB's replication stream pushes every write to the flow, and the flow finds the
same events as the in-process replay of the same telemetry. The stream itself is set up by
``influx.replication`` and shows its health (a wrong token is its 401, and nothing enters).

Time runs ten times faster than real (``REFLEX_PUSH_REPLAY``): the windows close by a clock
that reads the simulation's time, and the writer keeps a few windows ahead of it, as
collectors writing in real time would.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable

import pytest
from influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS
from test_flow_influx import SCENARIO, SECONDS, SEED, simulated_lines

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.io.push_source import PushSource, PushStats
from reflex_localize.flows.runner import run_in_process
from reflex_localize.influx.local_server import InfluxServer, free_port
from reflex_localize.influx.replication import ensure_stream, remove_stream, stream_status
from reflex_localize.schemas.line_file import line_stamp
from reflex_localize.shell.push_wiring import replay_clock
from reflex_localize.shell.simulated_source import SimulatorSource

pytestmark = pytest.mark.influx
WINDOW_NS = 10 * 10**9
SPEED = 10.0
# Windows close 20 s (of the replay's time) after their end, and each window is written 10 s
# before its start: no line is stamped further ahead of the clock than the lag (the source
# assumes collectors' clocks are no further off than that), and a busy machine has 3 s of real
# time to deliver a window before it closes.
LAG_S, AHEAD_NS = 20, 10 * 10**9
SHARDS = 3


class PacedWriter(threading.Thread):
    """Writes each window of telemetry once ``clock`` is ``ahead_ns`` before its start."""

    def __init__(
        self,
        server: InfluxServer,
        bucket: str,
        windows: list[tuple[int, list[str]]],
        clock: Callable[[], int],
        ahead_ns: int = AHEAD_NS,
    ) -> None:
        super().__init__(daemon=True)
        self.server, self.bucket, self.windows = server, bucket, windows
        self.clock, self.ahead_ns = clock, ahead_ns
        self.written = 0  # windows
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            with InfluxDBClient(self.server.url, self.server.token, org=self.server.org) as client:
                api = client.write_api(write_options=SYNCHRONOUS)
                for window, lines in self.windows:
                    while self.clock() < window * WINDOW_NS - self.ahead_ns:
                        time.sleep(0.02)
                    api.write(self.bucket, self.server.org, "\n".join(lines))
                    self.written += 1
        except BaseException as error:  # the test reports it
            self.failure = error


def by_window(lines: list[str]) -> list[tuple[int, list[str]]]:
    windows: dict[int, list[str]] = {}
    for line in lines:
        stamp = line_stamp(line)
        assert stamp is not None
        windows.setdefault(stamp // WINDOW_NS, []).append(line)
    return sorted(windows.items())


@pytest.fixture(scope="module")
def telemetry() -> tuple[list[tuple[int, list[str]]], int]:
    lines, start = simulated_lines(SECONDS)
    return by_window(lines), start


@pytest.fixture(scope="module")
def expected_events(telemetry: tuple[list[tuple[int, list[str]]], int]) -> list[LocalizationEvent]:
    """The in-process replay of the same telemetry (the simulator, no database)."""
    _, start = telemetry
    stop = start + SECONDS * 10**9
    direct = run_in_process(SimulatorSource(SCENARIO, SEED, SHARDS, 10.0))
    events = [e for e in direct.events if e.time_ns <= stop]
    assert events, "the XID 79 must be localized"
    return events


def stream_to(server: InfluxServer, bucket: str, port: int, token: str, name: str) -> dict:
    return ensure_stream(
        server.settings(),
        name=name,
        local_bucket=bucket,
        remote_url=f"http://127.0.0.1:{port}",
        remote_token=token,
        remote_org="reflex",
    )


@pytest.mark.slow
def test_push_gives_the_same_events_as_the_in_process_replay(
    influx: InfluxServer,
    influx_bucket: str,
    telemetry: tuple[list[tuple[int, list[str]]], int],
    expected_events: list[LocalizationEvent],
) -> None:
    windows, start = telemetry
    token, port = secrets.token_hex(16), free_port()
    stream_to(influx, influx_bucket, port, token, f"push-{influx_bucket}")
    # The clock starts 30 s before the data: the first windows are the (empty) backfill.
    clock, speed = replay_clock(f"{start - 30 * 10**9},{time.time_ns()},{SPEED}")
    source = PushSource(
        influx.settings(influx_bucket),
        push_token=token,
        port=port,
        n_shards=SHARDS,
        start_ns=start - 30 * 10**9,
        stop_ns=start + SECONDS * 10**9,
        clock=clock,
        clock_speed=speed,
        lag_seconds=LAG_S,
    )
    writer = PacedWriter(influx, influx_bucket, windows, clock)
    writer.start()
    try:
        result = run_in_process(source)
    finally:
        writer.join(timeout=60)
        remove_stream(influx.settings(), f"push-{influx_bucket}")
    assert writer.failure is None and writer.written == len(windows)
    assert [e.event_id for e in result.events] == [e.event_id for e in expected_events]
    assert [e.to_json() for e in result.events] == [e.to_json() for e in expected_events]
    assert not result.errors, result.error_counts
    # Every line came by the push, once; no window needed Flux.
    stats = source.stats.values()
    assert sum(s.lines for s in stats) == sum(len(lines) for _, lines in windows)
    assert sum(s.covered + s.late + s.duplicates + s.backfill_windows for s in stats) == 0


def test_the_stream_shows_a_wrong_token_and_nothing_enters(
    influx: InfluxServer, influx_bucket: str
) -> None:
    name, port = f"wrong-{influx_bucket}", free_port()
    now = {"ns": 1_767_225_600 * 10**9}
    source = PushSource(
        influx.settings(influx_bucket),
        push_token="the-flows-own-token",
        port=port,
        n_shards=1,
        start_ns=now["ns"],
        clock=lambda: now["ns"],
    )
    part = source.build_part("in", "shard-0", None)
    source.start_receiving()
    try:
        created = stream_to(influx, influx_bucket, port, "not-the-token", name)
        assert created["created"] and not created["updated"]
        again = stream_to(influx, influx_bucket, port, "not-the-token", name)
        assert not again["created"] and not again["updated"]  # idempotent
        with InfluxDBClient(influx.url, influx.token, org=influx.org) as client:
            line = f"host,cluster=c,node=n1 load1=0.5 {now['ns'] + 10**9}"
            client.write_api(write_options=SYNCHRONOUS).write(influx_bucket, influx.org, line)
        status = wait_for(lambda: stream_status(influx.settings(), name), "latest_response_code")
        assert status["latest_response_code"] == 401
        assert "401" in status["latest_error"] or "unauthorized" in status["latest_error"].lower()
        assert status["queue_bytes"] > 0  # InfluxDB keeps it queued, to retry
        # Refused at the door: no line was taken, not even counted as covered.
        assert part.stats == PushStats() and part.push_from is None
        assert source.receiver.stats[401] >= 1 and not source.receiver.stats[204]
    finally:
        part.close()
        assert remove_stream(influx.settings(), name)
        assert not remove_stream(influx.settings(), name)
        assert stream_status(influx.settings(), name) is None


def wait_for(read: Callable[[], dict | None], key: str, timeout_s: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = read()
        if found is not None and found.get(key) is not None:
            return found
        time.sleep(0.2)
    raise AssertionError(f"no {key} after {timeout_s} s")


def test_a_fresh_start_reads_what_was_written_before_the_stream_from_the_bucket(
    influx: InfluxServer, influx_bucket: str
) -> None:
    """The flow starts 8 s into a window that holds a line written before the stream existed:
    that line is in the bucket only. The stream goes live with the window's next line, and the
    window must come from Flux (both lines), not from the push (the second alone)."""
    window = 1_767_225_600 * 10**9
    now = {"ns": window + 8 * 10**9}
    before, after = window + 2 * 10**9, window + 9 * 10**9
    name, token, port = f"fresh-{influx_bucket}", secrets.token_hex(16), free_port()
    with InfluxDBClient(influx.url, influx.token, org=influx.org) as client:
        write = client.write_api(write_options=SYNCHRONOUS)
        write.write(influx_bucket, influx.org, f"host,cluster=c,node=n1 load1=0.5 {before}")
        stream_to(influx, influx_bucket, port, token, name)
        source = PushSource(
            influx.settings(influx_bucket),
            push_token=token,
            port=port,
            n_shards=1,
            lag_seconds=5.0,
            stop_ns=window + 10 * 10**9,
            clock=lambda: now["ns"],
        )
        part = source.build_part("in", "shard-0", None)
        try:
            assert part.next_batch() == []  # starts the receiver; window not closed yet
            write.write(influx_bucket, influx.org, f"host,cluster=c,node=n1 load1=0.7 {after}")
            deadline = time.monotonic() + 20
            while part.push_from is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert part.push_from is not None, "the stream never went live"
            now["ns"] = window + 16 * 10**9  # the window has closed, lag included
            stamps: list[int] = []
            with pytest.raises(StopIteration):
                for _ in range(50):
                    batches = part.next_batch()
                    stamps += [t for b in batches for f in b.frames for t in f.time_ns.tolist()]
        finally:
            part.close()
            remove_stream(influx.settings(), name)
    assert sorted(stamps) == [before, after]
