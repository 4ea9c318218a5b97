"""`reflex flow --source influx-push` killed with SIGKILL while InfluxDB keeps writing: restarted
on its recovery directory it reads back from its resume point what it had not emitted, takes
the stream again as InfluxDB's queue drains, and gives the same events, none twice. Killed a
second time, its stream is removed while it is down (the queue and what it held are gone, as
when the flow is down longer than ``maxQueueSizeBytes`` holds) and created again: the backfill
reads the gap from InfluxDB, and the events are again the same.

The baselines the flow exports are those of a run over the same telemetry from a
line-protocol file: no point was counted twice or missed.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from test_flow_recovery import baseline_counts
from test_push_source import (
    LAG_S,
    SHARDS,
    SPEED,
    PacedWriter,
    expected_events,
    stream_to,
    telemetry,
)

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.io.sinks import read_events
from reflex_localize.influx.local_server import InfluxServer, free_port
from reflex_localize.influx.replication import remove_stream, stream_status
from reflex_localize.shell.push_wiring import replay_clock

pytestmark = [pytest.mark.influx, pytest.mark.slow]
__all__ = ["expected_events", "telemetry"]  # module fixtures, shared with test_push_source
S = 10**9


def flow(out: Path, *args: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()", "flow"]
    command += [*args, "--sink", "files", "--out", str(out), "--cluster", "sim"]
    command += ["--shards", str(SHARDS)]
    return subprocess.Popen(
        command, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def wait_until(clock: Callable[[], int], time_ns: int, process: subprocess.Popen[bytes]) -> None:
    while clock() < time_ns:
        assert process.poll() is None, process.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
        time.sleep(0.05)


def kill(process: subprocess.Popen[bytes]) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def test_kill_9_and_a_gap_the_queue_lost_give_the_same_events_once(
    influx: InfluxServer,
    influx_bucket: str,
    telemetry: tuple[list[tuple[int, list[str]]], int],
    expected_events: list[LocalizationEvent],
    tmp_path: Path,
) -> None:
    windows, start = telemetry
    stop = start + 360 * S
    token, port, name = secrets.token_hex(16), free_port(), f"restart-{influx_bucket}"
    stream_to(influx, influx_bucket, port, token, name)
    replay = f"{start - 30 * S},{time.time_ns()},{SPEED}"
    clock, _ = replay_clock(replay)
    env = {
        "REFLEX_INFLUX_TOKEN": influx.token,
        "REFLEX_PUSH_TOKEN": token,
        "REFLEX_PUSH_LISTEN": f"127.0.0.1:{port}",
        "REFLEX_PUSH_REPLAY": replay,
    }
    args = ["--source", "influx-push", "--influx-url", influx.url, "--bucket", influx_bucket]
    args += ["--start-ns", str(start - 30 * S), "--stop-ns", str(stop), "-s", "1"]
    args += ["--lag", str(LAG_S)]
    out = tmp_path / "flow"
    writer = PacedWriter(influx, influx_bucket, windows, clock)
    writer.start()
    try:
        first = flow(out, *args, env=env)
        wait_until(clock, start + 100 * S, first)
        kill(first)
        # InfluxDB goes on writing; the stream queues what it cannot send.
        time.sleep(20 * S / SPEED / S)
        second = flow(out, *args, env=env)
        wait_until(clock, start + 200 * S, second)
        kill(second)
        remove_stream(influx.settings(), name)  # the queue, and all it held, is gone
        time.sleep(40 / SPEED)  # 40 s of writes that no queue holds
        stream_to(influx, influx_bucket, port, token, name)
        third = flow(out, *args, env=env)
        _, stderr = third.communicate(timeout=120)
        assert third.returncode == 0, stderr.decode()[-2000:]
        status = stream_status(influx.settings(), name)
        assert status is not None and status["latest_response_code"] == 204  # the flow took it
    finally:
        writer.join(timeout=60)
        remove_stream(influx.settings(), name)
    assert writer.failure is None and writer.written == len(windows)

    got = read_events(out / "events.jsonl")
    ids = [e.event_id for e in got]
    assert len(ids) == len(set(ids)), "an event was written twice"
    assert [e.to_json() for e in got] == [e.to_json() for e in expected_events]
    reference = tmp_path / "file"
    lines_file = tmp_path / "telemetry.lp"
    lines_file.write_text("".join(line + "\n" for _, lines in windows for line in lines))
    replayed = flow(reference, "--source", f"file:{lines_file}", "--no-recovery", env={})
    _, stderr = replayed.communicate(timeout=120)
    assert replayed.returncode == 0, stderr.decode()[-2000:]
    assert baseline_counts(out / "outputs.lp") == baseline_counts(reference / "outputs.lp")
