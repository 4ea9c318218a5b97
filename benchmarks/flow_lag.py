"""End-to-end lag: a simulated 1,024-GPU cluster writes 1 s telemetry into InfluxDB in real
time; ``reflex flow --source influx --sink influx`` runs beside it; a poller records when each
window's scores first become queryable with Flux.

Lag of a window = (first seen in the results bucket) - (window end). The window's last point
is written at about its end, so this is its lag; an average point waits half a window more.
"Beyond the poll lag" subtracts the configured ``--lag``.

    .venv/bin/python benchmarks/flow_lag.py [--gpus 1024] [--seconds 150] [--window 10] [--lag 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS

from reflex_localize.influx.local_server import InfluxServer, start_influxdb
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.simulator import Simulation, load_scenario
from reflex_localize.simulator.scenario import scale_scenario

CLI = [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()", "flow"]
SEEN_FLUX = """from(bucket: "reflex") |> range(start: -15m)
  |> filter(fn: (r) => r._measurement == "reflex_score" and r._field == "score")
  |> group() |> distinct(column: "_time")"""


def feed(server: InfluxServer, gpus: int, seconds: int, base_ns: int, stats: dict) -> None:
    """Writes one simulated second per wall second, stamped with wall-clock time."""
    scenario = scale_scenario(load_scenario("demo"), gpus)
    sim = Simulation(scenario, seed=7)
    offset = base_ns - sim.start_ns
    with InfluxDBClient(server.url, server.token, org=server.org, timeout=30_000) as client:
        api = client.write_api(write_options=SYNCHRONOUS)
        behind = []
        for second, chunk in enumerate(sim.chunks(1.0)):
            if second >= seconds:
                break
            due = (base_ns + (second + 1) * 10**9) / 1e9
            time.sleep(max(0.0, due - time.time()))
            lines = []
            for frame in chunk:
                frame.time_ns = frame.time_ns + offset
                lines += encode_frame(frame)
            for i in range(0, len(lines), 5000):
                api.write("telemetry", server.org, "\n".join(lines[i : i + 5000]))
            stats["points"] = stats.get("points", 0) + len(lines)
            behind.append(time.time() - due)
        stats["write_behind_p95_s"] = float(np.percentile(behind, 95))


def poll(server: InfluxServer, seen: dict[int, float], stop: threading.Event) -> None:
    with InfluxDBClient(server.url, server.token, org=server.org, timeout=30_000) as client:
        query = client.query_api()
        while not stop.is_set():
            now = time.time()
            for table in query.query(SEEN_FLUX):
                for record in table.records:
                    end_ns = int(record.get_value().timestamp() * 1e9)
                    seen.setdefault(end_ns, now)
            time.sleep(0.25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--seconds", type=int, default=150)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--lag", type=float, default=5.0)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1, help="Worker threads per process.")
    args = parser.parse_args()
    window_ns = int(args.window * 1e9)
    with start_influxdb() as server, tempfile.TemporaryDirectory() as tmp:
        base_ns = (time.time_ns() // window_ns + 1) * window_ns
        env = {**os.environ, "REFLEX_INFLUX_URL": server.url, "REFLEX_INFLUX_TOKEN": server.token}
        command = [*CLI, "--source", "influx", "--sink", "influx", "--out", str(Path(tmp) / "o")]
        command += ["--window", str(args.window), "--lag", str(args.lag), "--cluster", "sim"]
        command += ["--start-ns", str(base_ns), "--no-recovery", "-p", str(args.processes)]
        command += ["-w", str(args.workers)]
        flow = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
        seen: dict[int, float] = {}
        stats: dict = {}
        stop = threading.Event()
        poller = threading.Thread(target=poll, args=(server, seen, stop), daemon=True)
        poller.start()
        feed(server, args.gpus, args.seconds, base_ns, stats)
        time.sleep(args.window + args.lag + 15)
        stop.set()
        poller.join()
        flow.terminate()
        _, err = flow.communicate(timeout=60)
        last_end = base_ns + args.seconds * 10**9
        lags = np.array([t - end / 1e9 for end, t in seen.items() if end <= last_end])
        expected = args.seconds * 10**9 // window_ns
        print(f"{args.gpus} GPUs, 1 s resolution, {args.seconds} s real time: "
              f"{stats['points']:,} points ({stats['points'] / args.seconds:,.0f}/s), "
              f"writer behind p95 {stats['write_behind_p95_s']:.2f} s")  # fmt: skip
        print(f"windows {args.window:g} s, poll lag {args.lag:g} s, "
              f"{args.processes} process(es) x {args.workers} worker(s)")  # fmt: skip
        if not len(lags):
            print("no window's scores became queryable", err.decode()[-2000:])
            return
        p50, p95 = np.percentile(lags, 50), np.percentile(lags, 95)
        print(f"windows with scores queryable: {len(lags)} of {expected}")
        print(f"lag after window end:  p50 {p50:.2f} s  p95 {p95:.2f} s  max {lags.max():.2f} s")
        print(f"lag beyond poll lag:   p50 {p50 - args.lag:.2f} s  p95 {p95 - args.lag:.2f} s")
        print(f"average point (+half a window): p50 {p50 + args.window / 2:.2f} s")


if __name__ == "__main__":
    main()
