"""The flow's /healthz and /metrics, asked over real HTTP: while the real flow replays a capture
with broken lines (the figures must be the run's own), when a sink blocks the worker, and in
each process of `reflex --log-format json flow -p 2` (ports P and P+1, JSON logs from both)."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bytewax.testing import run_main
from prometheus_client import CollectorRegistry
from xid79_capture import xid79_chunks

from reflex_localize.flows.flow_metrics import FlowMetrics, metered_sinks, metered_source
from reflex_localize.flows.io.sinks import callback_sinks
from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.localize import build_flow
from reflex_localize.influx.health_server import HealthServer
from reflex_localize.influx.local_server import free_port
from reflex_localize.shell.flow_health import with_health

BROKEN = ["not line protocol at all", "gpu,cluster=c,node=n1 temperature_celsius=oops 1"]


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def samples(metrics: str, name: str) -> dict[str, float]:
    """Every sample of ``name`` (a counter's ``_total``), keyed by its labels text."""
    found = {}
    for line in metrics.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            key, value = line.rsplit(" ", 1)
            found[key[len(name) :]] = float(value)
    return found


def wait_for(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def write_capture(path: Path, seconds: int) -> Path:
    """The XID 79 scenario's first ``seconds`` as line protocol, with broken lines in it."""
    with path.open("w") as out:
        for number, lines in enumerate(xid79_chunks(seconds)):
            out.writelines(line + "\n" for line in lines)
            if number in (3, 4):
                out.writelines(line + "\n" for line in BROKEN)
    return path


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_capture(tmp_path_factory.mktemp("capture") / "capture.lp", 360)


@pytest.mark.slow
def test_the_metrics_are_the_runs_own_figures(
    capture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REFLEX_HEALTH_ADDRESS", "127.0.0.1:0")
    outputs: dict[str, list[Any]] = {"event": [], "error": [], "points": []}
    registry = CollectorRegistry()
    source, sinks, server = with_health(
        LineProtocolSource(capture, 2, 10.0),
        callback_sinks(lambda route, item: outputs[route].append(item)),
        tmp_path,
        registry,
    )
    assert server is not None
    try:
        assert get(server.port, "/healthz") == (
            503,
            "starting: the source has not been polled yet\n",
        )
        run_main(build_flow(source, sinks, window_seconds=10.0))
        status, _ = get(server.port, "/healthz")
        metrics = get(server.port, "/metrics")[1]
    finally:
        server.stop()
    assert status == 200
    assert outputs["event"], "the XID 79 must be localized"
    events = samples(metrics, "reflex_flow_events_total")
    assert sum(events.values()) == len(outputs["event"])
    first = outputs["event"][0]
    assert events[f'{{severity="{first.severity}",trigger="{first.trigger}"}}'] >= 1
    rejected = samples(metrics, "reflex_flow_rejected_records_total")
    expected = Counter((e.where, e.reason) for e in outputs["error"])
    assert sum(expected.values()) >= len(BROKEN) * 2  # the broken lines are among them
    assert {k: int(v) for k, v in rejected.items()} == {
        f'{{reason="{reason}",where="{where}"}}': n for (where, reason), n in expected.items()
    }
    emitted = sum(len(batch) for batch in outputs["points"])
    assert samples(metrics, "reflex_flow_points_emitted_total") == {"": emitted}
    windows = samples(metrics, "reflex_flow_source_batches_total")[""]
    assert windows >= 36  # 360 s of 10 s windows, per shard that had data
    lag = samples(metrics, "reflex_flow_source_lag_seconds")[""]
    assert lag > 0  # the capture is of the past: wall clock minus its newest window


def test_a_blocked_sink_turns_the_flow_unhealthy(tmp_path: Path) -> None:
    capture = write_capture(tmp_path / "short.lp", 60)
    registry = CollectorRegistry()
    metrics = FlowMetrics(registry, stuck_after_s=0.5)
    server = HealthServer(("127.0.0.1", 0), metrics.problem, registry)
    server.start()
    release, blocked = threading.Event(), threading.Event()

    def slow_sink(route: str, item: object) -> None:
        if route == "points" and not blocked.is_set():
            blocked.set()
            release.wait(30)  # InfluxDB hanging on a write

    flow = build_flow(
        metered_source(LineProtocolSource(capture, 1, 10.0), metrics),
        metered_sinks(callback_sinks(slow_sink), metrics),
        window_seconds=10.0,
    )
    runner = threading.Thread(target=run_main, args=(flow,), daemon=True)
    runner.start()
    try:
        wait_for(blocked.is_set)
        wait_for(lambda: get(server.port, "/healthz")[0] == 503)
        status, body = get(server.port, "/healthz")
        assert status == 503 and body.startswith("stuck: the source has not been polled for")
        release.set()
        wait_for(lambda: get(server.port, "/healthz")[0] == 200 or not runner.is_alive())
    finally:
        release.set()
        runner.join(timeout=120)
        server.stop()


@pytest.mark.slow
def test_every_process_of_reflex_flow_serves_and_logs_json(capture: Path, tmp_path: Path) -> None:
    port = free_port()
    while True:  # process 1 serves on port + 1: both must be free
        try:
            get(port + 1, "/")
        except OSError:
            break
        port = free_port()
    command = [sys.executable, "-m", "reflex_localize", "--log-format", "json", "flow",
               "--source", f"file:{capture}", "--sink", "files", "--out", str(tmp_path),
               "--no-recovery", "-p", "2", "--health-address", f"127.0.0.1:{port}"]  # fmt: skip
    flow = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    scraped: list[str] = []
    while flow.poll() is None:
        try:
            scraped.append(get(port, "/metrics")[1])
        except (OSError, http.client.HTTPException):  # not up yet, or it exited mid-answer
            time.sleep(0.05)
    _, stderr = flow.communicate(timeout=170)
    assert flow.returncode == 0, stderr.decode()[-2000:]
    records = [json.loads(line) for line in stderr.decode().splitlines() if line]
    serving = {r["process"]: r["message"] for r in records if r["message"].startswith("health")}
    assert sorted(serving.values()) == [
        f"health and metrics on http://127.0.0.1:{port + k}/" for k in (0, 1)
    ]
    assert any("reflex_flow_source_batches_total" in text for text in scraped)
    (rejects,) = [r for r in records if r["logger"] == "reflex.rejects"]  # not a table: JSON
    assert rejects["message"].startswith(f"{len(BROKEN) * 2} records rejected: [")
