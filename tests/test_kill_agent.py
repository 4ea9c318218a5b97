"""`reflex collect` killed with SIGKILL at ten random points, restarted each time: every
point it had journaled reaches the real InfluxDB, once.

Without the journal a kill loses whatever waited for the next flush (up to
``flush_interval_s``, here 5 s); with it, at most the collection in progress. So the last
stored host point of each run must sit within a second of the kill."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ALL_TIME
from test_collectors_agent import write_config

pytestmark = [pytest.mark.influx, pytest.mark.slow]
KILLS = 10
TICK_S = 0.2


def agent(config: Path, influx: Any, bucket: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "REFLEX_INFLUX_URL": influx.url,
        "REFLEX_INFLUX_TOKEN": influx.token,
        "REFLEX_INFLUX_ORG": influx.org,
        "REFLEX_INFLUX_BUCKET": bucket,
    }
    command = [
        sys.executable,
        "-c",
        "from reflex_localize.shell.cli import main; main()",
        "collect",
        "--config",
        str(config),
    ]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def collecting(journal: Path, since: float, process: subprocess.Popen[bytes]) -> None:
    """Waits until the agent has journaled a collection after ``since``."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if any(p.stat().st_mtime >= since for p in journal.glob("journal-*") if p.exists()):
            return
        time.sleep(0.05)
    raise AssertionError("the agent journaled nothing within 60 s of its start")


def host_times(influx: Any, bucket: str) -> list[int]:
    rows = influx.query_rows(
        f'from(bucket: "{bucket}") |> {ALL_TIME} '
        '|> filter(fn: (r) => r._measurement == "host" and r._field == "load1")'
    )
    return sorted(int(row["_time"].timestamp() * 1e9) for row in rows)


def test_ten_kills_lose_nothing_journaled(influx: Any, influx_bucket: str, tmp_path: Path) -> None:
    config = write_config(
        tmp_path, f"flush_interval_s = 5.0\n[collect.intervals]\nhost = {TICK_S}\n"
    )
    rng = random.Random(9)
    kills: list[int] = []
    for _ in range(KILLS):
        started = time.time()
        process = agent(config, influx, influx_bucket)
        # Kill only once it collects: on a loaded machine start-up alone can take seconds, and
        # a kill before the first collection would hold the previous run's last point.
        collecting(tmp_path / "spool" / "journal", started, process)
        time.sleep(rng.uniform(0.5, 2.0))  # a few collections, then the kill
        assert process.poll() is None, process.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
        process.send_signal(signal.SIGKILL)
        kills.append(time.time_ns())
        process.wait(timeout=30)
    final = agent(config, influx, influx_bucket)
    time.sleep(3.0)
    final.send_signal(signal.SIGTERM)
    _, stderr = final.communicate(timeout=60)
    assert final.returncode == 0, stderr.decode()[-2000:]

    times = host_times(influx, influx_bucket)
    assert len(times) == len(set(times)), "a point was stored twice"
    for kill in kills:
        before = [t for t in times if t <= kill]
        assert before, "no point of this run reached InfluxDB"
        lag_s = (kill - before[-1]) / 1e9
        assert lag_s < 1.0, f"the last {lag_s:.1f} s before a kill were lost"
    assert list((tmp_path / "spool" / "journal").glob("journal-*")) == []
