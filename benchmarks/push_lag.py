"""End-to-end lag through the real InfluxDB with the push source: a simulated cluster writes
1 s telemetry into InfluxDB in real time; a replication stream pushes every write to
``reflex flow --source influx-push --sink influx``; a poller records when each window's scores
first become queryable with Flux.

Lag of a window = (first seen in the results bucket) - (window end). The window's last point
is written at about its end, so this is point written -> score queryable for its last point;
an average point waits half a window more. The flow closes a window ``--lag`` seconds after its
end (late writes), so "beyond the lag" subtracts it. CPU: seconds of CPU that influxd and the
flow (all its processes) used over the run, as a share of one core.

    .venv/bin/python benchmarks/push_lag.py [--gpus 256 1024 2048] [--seconds 90] [--lag 2]
        [--processes 2]

With ``--processes N`` the flow runs ``-p N``: process K listens on the base port plus K and
takes a replication stream of its own (each stream carries every write; a process keeps its
shards' lines).
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil
from flow_lag import feed, poll

from reflex_localize.influx.local_server import consecutive_free_ports, start_influxdb
from reflex_localize.influx.replication import ensure_stream, stream_status

CLI = [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()", "flow"]


def cpu_seconds(process: psutil.Process) -> float:
    """CPU time of a process and its children (a flow's Bytewax processes)."""
    total = 0.0
    for member in [process, *process.children(recursive=True)]:
        try:
            times = member.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def run(gpus: int, args: argparse.Namespace) -> None:
    window_ns = int(args.window * 1e9)
    with start_influxdb() as server, tempfile.TemporaryDirectory() as tmp:
        token, port = secrets.token_hex(16), consecutive_free_ports(args.processes)
        names = [f"reflex-flow-{index}" for index in range(args.processes)]
        for index, name in enumerate(names):
            ensure_stream(
                server.settings(),
                name=name,
                local_bucket="telemetry",
                remote_url=f"http://127.0.0.1:{port + index}",
                remote_token=token,
                remote_org=server.org,
            )
        base_ns = (time.time_ns() // window_ns + 2) * window_ns
        env = {
            **os.environ,
            "REFLEX_INFLUX_URL": server.url,
            "REFLEX_INFLUX_TOKEN": server.token,
            "REFLEX_PUSH_TOKEN": token,
            "REFLEX_PUSH_LISTEN": f"127.0.0.1:{port}",
        }
        command = [*CLI, "--source", "influx-push", "--sink", "influx"]
        command += ["--out", str(Path(tmp) / "o"), "--cluster", "sim", "--no-recovery"]
        command += ["--window", str(args.window), "--lag", str(args.lag)]
        command += ["--start-ns", str(base_ns), "-p", str(args.processes)]
        flow = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
        influxd = psutil.Process(server._process.pid)  # type: ignore[union-attr]
        flow_process = psutil.Process(flow.pid)
        time.sleep(3)  # the flow's start-up is not part of the measure
        cpu_before = (cpu_seconds(influxd), cpu_seconds(flow_process))
        began = time.monotonic()
        seen: dict[int, float] = {}
        stats: dict = {}
        stop = threading.Event()
        poller = threading.Thread(target=poll, args=(server, seen, stop), daemon=True)
        poller.start()
        feed(server, gpus, args.seconds, base_ns, stats)
        time.sleep(args.window + args.lag + 10)
        elapsed = time.monotonic() - began
        cpu_after = (cpu_seconds(influxd), cpu_seconds(flow_process))
        stop.set()
        poller.join()
        streams = [stream_status(server.settings(), name) for name in names]
        flow.terminate()
        _, err = flow.communicate(timeout=60)
    last_end = base_ns + args.seconds * 10**9
    lags = np.array([t - end / 1e9 for end, t in seen.items() if end <= last_end])
    expected = args.seconds * 10**9 // window_ns
    influx_share, flow_share = (
        (a - b) / elapsed for a, b in zip(cpu_after, cpu_before, strict=True)
    )
    print(f"\n{gpus} GPUs, 1 s resolution, {args.seconds} s real time: "
          f"{stats['points']:,} points ({stats['points'] / args.seconds:,.0f}/s), "
          f"writer behind p95 {stats['write_behind_p95_s']:.2f} s")  # fmt: skip
    print(f"windows {args.window:g} s, lag {args.lag:g} s, {args.processes} flow process(es), "
          "push source")  # fmt: skip
    for stream in streams:
        if stream is not None:
            print(f"stream: last answer {stream['latest_response_code']}, "
                  f"{stream['remaining_bytes']:,} bytes not yet sent at the end")  # fmt: skip
    print(f"CPU over {elapsed:.0f} s: influxd {influx_share:.2f} cores, "
          f"flow {flow_share:.2f} cores")  # fmt: skip
    if not len(lags):
        print("no window's scores became queryable", err.decode()[-2000:])
        return
    p50, p95 = np.percentile(lags, 50), np.percentile(lags, 95)
    print(f"windows with scores queryable: {len(lags)} of {expected}")
    print(f"lag after window end:  p50 {p50:.2f} s  p95 {p95:.2f} s  max {lags.max():.2f} s")
    print(f"lag beyond the lag:    p50 {p50 - args.lag:.2f} s  p95 {p95 - args.lag:.2f} s")
    print(f"average point (+half a window): p50 {p50 + args.window / 2:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpus", type=int, nargs="+", default=[256, 1024, 2048])
    parser.add_argument("--seconds", type=int, default=90)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--lag", type=float, default=2.0)
    parser.add_argument("--processes", type=int, default=1, help="flow processes (-p)")
    args = parser.parse_args()
    for gpus in args.gpus:
        run(gpus, args)


if __name__ == "__main__":
    main()
