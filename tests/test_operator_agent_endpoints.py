"""The agent's /healthz and /metrics, asked over real HTTP while a real agent loop runs: writing
to the real InfluxDB, writing to an address where nothing listens, and wedged in a collector;
and `reflex collect --health-address` as an operator starts it, with JSON logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import ALL_TIME, query_count

from reflex_localize.collectors.agent import Agent
from reflex_localize.collectors.agent_metrics import agent_version, serve_agent_health
from reflex_localize.collectors.host import HostCollector
from reflex_localize.collectors.sinks import WriterSink
from reflex_localize.influx.local_server import InfluxServer, free_port
from reflex_localize.influx.writer import Writer
from reflex_localize.schemas.codec import Point


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def sample(metrics: str, name: str) -> float:
    """The value of the one sample called exactly ``name`` (labels included)."""
    (value,) = [line.rsplit(" ", 1)[1] for line in metrics.splitlines() if line.startswith(name)]
    return float(value)


def wait_for(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@contextmanager
def running(agent: Agent, sink: WriterSink, spool: Path, **options: float) -> Iterator[int]:
    stop = threading.Event()
    loop = threading.Thread(target=agent.run, args=(stop,), daemon=True)
    server = serve_agent_health("127.0.0.1:0", agent, sink, spool, **options)
    loop.start()
    try:
        yield server.port
    finally:
        stop.set()
        loop.join(timeout=10)
        server.stop()
        sink.close()


@pytest.mark.influx
@pytest.mark.slow
def test_a_healthy_agent_reports_what_it_wrote(
    influx: InfluxServer, influx_bucket: str, tmp_path: Path
) -> None:
    writer = Writer(influx.url, influx.token, influx.org, influx_bucket, tmp_path / "spool")
    sink = WriterSink(writer, flush_interval_s=0.2, flush_wait_s=2.0)
    agent = Agent([HostCollector("c1", "n1")], sink.emit, cluster="c1", node="n1")
    with running(agent, sink, tmp_path / "spool") as port:
        wait_for(lambda: sample(get(port, "/metrics")[1], "reflex_agent_points_sent_total") > 0)
        status, body = get(port, "/healthz")
        assert (status, body) == (200, "ok\n")
        metrics = get(port, "/metrics")[1]
    assert sample(metrics, f'reflex_agent_info{{version="{agent_version()}"}}') == 1
    runs = sample(metrics, 'reflex_agent_collector_runs_total{collector="host"}')
    assert runs >= 1
    assert sample(metrics, 'reflex_agent_collector_failures_total{collector="host"}') == 0
    assert sample(metrics, "reflex_agent_loop_overdue_seconds") < 5
    sent = sample(metrics, "reflex_agent_points_sent_total")
    stored = query_count(
        influx,
        f'from(bucket: "{influx_bucket}") |> {ALL_TIME} '
        '|> filter(fn: (r) => r._measurement == "reflex_collector" and r._field == "success")',
    )
    assert stored >= 1 and sent >= stored  # each run is a host point set + one self-metric


def test_a_writer_that_cannot_deliver_turns_unhealthy(tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens: every write fails
    writer = Writer(nowhere, "token", "reflex", "telemetry", tmp_path / "spool", timeout_s=0.5)
    sink = WriterSink(writer, flush_interval_s=0.1, flush_wait_s=0.2)
    agent = Agent([HostCollector("c1", "n1")], sink.emit, cluster="c1", node="n1")
    with running(agent, sink, tmp_path / "spool", stuck_after_s=1.0) as port:
        assert get(port, "/healthz")[0] == 200  # the first look only notes what was sent
        wait_for(lambda: get(port, "/healthz")[0] == 503)
        status, body = get(port, "/healthz")
        live = get(port, "/livez")
        metrics = get(port, "/metrics")[1]
    assert status == 503 and body.startswith("writer stuck: nothing delivered to InfluxDB")
    assert live == (200, "ok\n")  # a restart would not bring InfluxDB back
    assert sample(metrics, "reflex_agent_points_sent_total") == 0
    waiting = sample(metrics, "reflex_agent_writer_backlog_points") + sample(
        metrics, "reflex_agent_queue_points"
    )
    assert waiting > 0 or sample(metrics, "reflex_agent_spool_bytes") > 0


class Wedged:
    """A collector whose read hangs (a wedged NVML call), until released."""

    name, interval_s = "wedged", 0.1

    def __init__(self) -> None:
        self.release = threading.Event()

    def collect(self, now_ns: int) -> Iterator[Point]:
        self.release.wait(30)
        yield from ()


def test_a_wedged_collector_turns_the_agent_unhealthy(tmp_path: Path) -> None:
    wedged = Wedged()
    emitted: list[Point] = []
    agent = Agent([wedged], emitted.extend, cluster="c1", node="n1")
    server = serve_agent_health("127.0.0.1:0", agent, None, None, stuck_after_s=0.5)
    stop = threading.Event()
    loop = threading.Thread(target=agent.run, args=(stop,), daemon=True)
    loop.start()
    try:
        wait_for(lambda: get(server.port, "/healthz")[0] == 503)
        status, body = get(server.port, "/healthz")
        assert status == 503 and body.startswith("collector loop stuck: a collector is")
        assert get(server.port, "/livez")[0] == 503
        wedged.release.set()
        wait_for(lambda: get(server.port, "/healthz")[0] == 200)
        assert get(server.port, "/nothing")[0] == 404
    finally:
        wedged.release.set()
        stop.set()
        loop.join(timeout=10)
        server.stop()


@pytest.mark.slow
def test_reflex_collect_serves_health_and_logs_json(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "REFLEX_CLUSTER": "c1", "REFLEX_NODE": "n1",
           "REFLEX_HOOK_SOCKET": str(tmp_path / "hook.sock")}  # fmt: skip
    command = [sys.executable, "-m", "reflex_localize", "--log-format", "json", "--log-level",
               "info", "collect", "--stdout", "--health-address", f"127.0.0.1:{port}"]  # fmt: skip
    agent = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path
    )
    try:
        wait_for(lambda: _answers(port))
        # Health is served before the first collection ends: wait for one host run.
        wait_for(lambda: _host_runs(get(port, "/metrics")[1]) >= 1)
        metrics = get(port, "/metrics")[1]
        assert get(port, "/healthz") == (200, "ok\n")
    finally:
        agent.send_signal(signal.SIGTERM)
        _, stderr = agent.communicate(timeout=30)
    assert agent.returncode == 0, stderr.decode()[-2000:]
    assert _host_runs(metrics) >= 1
    assert "reflex_agent_queue_points" not in metrics  # --stdout: no writer to report on
    lines = stderr.decode().splitlines()
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert {"time", "level", "logger", "process", "message"} <= set(records[0])
    assert any(r["message"].startswith("health and metrics on http://127.0.0.1:") for r in records)


def _host_runs(metrics: str) -> float:
    return sample(metrics, 'reflex_agent_collector_runs_total{collector="host"}')


def _answers(port: int) -> bool:
    try:
        return get(port, "/healthz")[0] == 200
    except OSError:
        return False
