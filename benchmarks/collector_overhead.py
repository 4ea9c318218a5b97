"""CPU time per collection cycle of each collector, and the agent's RSS.

Runs each collector through the agent (so schema validation, self-metrics and line-protocol
encoding are counted too) for ``--cycles`` runs back to back and reports process CPU time per
run, and the share of one core that costs at the collector's interval. Target: host + NIC at
1 s under 1% of one core.

    .venv/bin/python benchmarks/collector_overhead.py --cycles 500
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

from reflex_localize.collectors.agent import Agent
from reflex_localize.collectors.base import Collector
from reflex_localize.collectors.filesystems import FilesystemCollector
from reflex_localize.collectors.gpu import GpuCollector
from reflex_localize.collectors.host import HostCollector
from reflex_localize.collectors.kmsg import KmsgCollector
from reflex_localize.collectors.nic import NicCollector
from reflex_localize.collectors.nvml_fake import FakeNvml
from reflex_localize.schemas.codec import Point, encode_many

FIXTURES = Path(__file__).parents[1] / "tests" / "fixtures"
IB_FIXTURE = "nic (fixture: 3 HCA ports + 4 netdevs)"


def collectors() -> list[tuple[str, Collector]]:
    kmsg = Path("/dev/kmsg") if os.access("/dev/kmsg", os.R_OK) else FIXTURES / "kmsg/kmsg.txt"
    return [
        ("host (this machine)", HostCollector("c", "n")),
        ("nic (this machine)", NicCollector("c", "n")),
        (IB_FIXTURE, NicCollector("c", "n", sys_root=FIXTURES / "nic/sys")),
        ("host_fs (this machine)", FilesystemCollector("c", "n")),
        (f"kmsg ({kmsg})", KmsgCollector("c", "n", path=kmsg)),
        ("gpu (fake NVML, 8 x H100, NVLinks every run)", gpu(nvlink_interval_s=0)),
        ("gpu (fake NVML, 8 x H100, NVLinks every 10 s)", gpu(nvlink_interval_s=10)),
    ]


def gpu(nvlink_interval_s: float) -> GpuCollector:
    nvml = FakeNvml.h100_node(8)
    return GpuCollector("c", "n", nvml=nvml, nvlink_interval_s=nvlink_interval_s)


def cpu_per_cycle(collector: Collector, cycles: int) -> tuple[float, int]:
    sink_bytes = 0

    def sink(points: list[Point]) -> None:
        nonlocal sink_bytes
        sink_bytes += len(encode_many(points))  # the agent's real work includes encoding

    agent = Agent([collector], sink, cluster="c", node="n")
    agent.run_once()  # warm-up: first reads, NVML init, identity
    started = time.process_time()
    for _ in range(cycles):
        agent.run_once()
    return (time.process_time() - started) / cycles, sink_bytes // (cycles + 1)


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=300)
    args = parser.parse_args()
    print(f"{'collector':<50} {'CPU ms/run':>10} {'% core @1s':>10} {'bytes/run':>10}")
    results = {}
    for label, collector in collectors():
        seconds, size = cpu_per_cycle(collector, args.cycles)
        results[label] = seconds
        print(f"{label:<50} {seconds * 1e3:>10.3f} {seconds * 100:>10.3f} {size:>10}")
    host_nic = results["host (this machine)"] + results["nic (this machine)"]
    host_nic_ib = results["host (this machine)"] + results[IB_FIXTURE]
    print(f"host + nic (this machine) at 1 s: {host_nic * 100:.3f}% of one core (target < 1%)")
    print(f"host + nic (IB fixture) at 1 s:   {host_nic_ib * 100:.3f}% of one core (target < 1%)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"agent RSS: {rss_mib():.1f} MiB (peak {peak:.1f} MiB)")


if __name__ == "__main__":
    main()
