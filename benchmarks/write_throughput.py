"""Points per second into a local InfluxDB from one process: the Writer vs one point a request.

Both paths validate and encode every point with the codec; the difference is batching (5,000
lines a request, gzip'd) against one HTTP request per point. Both run in one invocation against
one fresh InfluxDB, so the ratio compares like with like.

    .venv/bin/python benchmarks/write_throughput.py [--points 200000] [--naive-seconds 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS

from reflex_localize.influx.local_server import InfluxServer, start_influxdb
from reflex_localize.influx.writer import Writer
from reflex_localize.schemas.codec import Point, encode

START_NS = 1_700_000_000_000_000_000


def gpu_points(count: int, offset: int = 0) -> Iterator[Point]:
    """A fleet's GPU samples: 8 GPUs a node, one sample a second, ten fields each."""
    for i in range(offset, offset + count):
        node, gpu, second = (i // 8) % 512, i % 8, i // 4096
        yield Point(
            "gpu",
            {"cluster": "bench", "node": f"node-{node:04d}", "gpu": str(gpu), "profile": "h100"},
            {
                "utilization_gpu_ratio": 0.97,
                "memory_used_bytes": 70_000_000_000 + i,
                "sm_clock_mhz": 1980,
                "power_watts": 650.5 + gpu,
                "temperature_celsius": 61.0 + gpu / 2,
                "clocks_event_reasons": 0,
                "ecc_corrected_volatile": i % 3,
                "pcie_replay_errors": 0,
                "nvlink_active_links": 18,
                "memory_temperature_celsius": 70.0,
            },
            START_NS + second * 1_000_000_000,
        )


def bench_writer(server: InfluxServer, points: int) -> float:
    server.create_bucket("bench-writer")
    with tempfile.TemporaryDirectory() as spool:
        started = time.perf_counter()
        writer = Writer(server.url, server.token, server.org, "bench-writer", Path(spool))
        writer.write(gpu_points(points))
        assert writer.close(), "the writer left points in its spool"
        elapsed = time.perf_counter() - started
    assert writer.stats.sent == points and writer.stats.rejected == 0, writer.stats
    return points / elapsed


def bench_naive(server: InfluxServer, seconds: float) -> float:
    server.create_bucket("bench-naive")
    with InfluxDBClient(server.url, server.token, org=server.org, timeout=10_000) as client:
        write_api = client.write_api(write_options=SYNCHRONOUS)
        sent, started = 0, time.perf_counter()
        for point in gpu_points(10**9):
            write_api.write("bench-naive", record=encode(point))
            sent += 1
            if sent % 100 == 0 and time.perf_counter() - started >= seconds:
                break
        return sent / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=200_000, help="points for the Writer")
    parser.add_argument("--naive-seconds", type=float, default=5.0, help="run time of the naive")
    args = parser.parse_args()
    with start_influxdb() as server:
        naive = bench_naive(server, args.naive_seconds)
        batched = bench_writer(server, args.points)
    print(f"naive, one point per request : {naive:>10,.0f} points/s")
    print(f"Writer, batched + gzip       : {batched:>10,.0f} points/s ({args.points:,} points)")
    print(f"ratio                        : {batched / naive:>10.1f}x")


if __name__ == "__main__":
    main()
