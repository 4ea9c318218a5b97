"""InfluxDB stops and comes back under a live `reflex flow --source influx`: the flow waits,
retries, resumes where it was, and gives the same events as a run without the outage.

Before, urllib3's NewConnectionError (not an OSError) escaped the source: the flow died with
the server and never saw it come back.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reflex_localize.flows.io.sinks import read_events
from reflex_localize.influx.local_server import InfluxServer, start_influxdb
from reflex_localize.influx.writer import Writer
from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator import Simulation, load_scenario

pytestmark = [pytest.mark.influx, pytest.mark.slow]
# The library's fault_xid79 on six nodes, not twelve: the same XID 79 at 300 s, half the rows
# each of the two runs reads back.
SCENARIO = str(Path(__file__).resolve().parent / "scenarios" / "fault_xid79_six_nodes.toml")
SECONDS = 400


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InfluxServer, int, int]]:
    """A server of this module's own (it is stopped mid-test), holding the scenario."""
    with start_influxdb(data_dir=tmp_path_factory.mktemp("influxd")) as influx:
        sim = Simulation(load_scenario(SCENARIO), seed=7)
        frames: list[Frame] = []
        for number, chunk in enumerate(sim.chunks(seconds=10)):
            if number * 10 >= SECONDS:
                break
            frames += chunk
        spool = tmp_path_factory.mktemp("spool")
        with Writer.from_settings(influx.settings(), spool) as writer:
            writer.write_frames(frames)
        yield influx, sim.start_ns, sim.start_ns + SECONDS * 10**9


def _flow(server: InfluxServer, out: Path, start_ns: int, stop_ns: int) -> subprocess.Popen:
    command = [sys.executable, "-m", "reflex_localize", "flow", "--source", "influx"]
    command += ["--sink", "files", "--out", str(out), "--no-recovery", "--lag", "0"]
    command += ["--start-ns", str(start_ns), "--stop-ns", str(stop_ns), "--shards", "2"]
    command += ["--influx-url", server.url]
    env = {"REFLEX_INFLUX_TOKEN": server.token, "PATH": "/usr/bin:/bin"}
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _finish(process: subprocess.Popen, timeout_s: float = 400) -> str:
    _, stderr = process.communicate(timeout=timeout_s)
    text = stderr.decode()
    assert process.returncode == 0, text[-3000:]
    return text


def test_an_outage_mid_run_changes_no_event(
    server: tuple[InfluxServer, int, int], tmp_path: Path
) -> None:
    influx, start_ns, stop_ns = server
    reference = tmp_path / "reference"
    _finish(_flow(influx, reference, start_ns, stop_ns))
    expected = read_events(reference / "events.jsonl")
    assert any(e.trigger == "explicit" for e in expected)

    out = tmp_path / "outage"
    running = _flow(influx, out, start_ns, stop_ns)
    time.sleep(3)  # the flow has started reading
    assert running.poll() is None, "the flow finished before the outage: make it longer"
    influx.stop()
    time.sleep(8)  # refused connections meanwhile
    assert running.poll() is None, "the flow died with the server"
    influx.start()
    log = _finish(running)
    assert "retrying" in log  # the outage was seen, and waited out
    got = read_events(out / "events.jsonl")
    assert [(e.event_id, e.summary) for e in got] == [(e.event_id, e.summary) for e in expected]
