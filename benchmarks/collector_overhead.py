"""CPU time per collection cycle of each collector, and the agent's RSS.

Runs each collector through the agent (so schema validation, self-metrics and line-protocol
encoding are counted too) for ``--cycles`` runs back to back and reports process CPU time per
run, and the share of one core that costs at the collector's interval. Target: host + NIC at
1 s under 1% of one core.

The GPU rows count NVML calls per run, and give each call a CPU cost (``--nvml-call-us``,
default 160 µs: issue 39's 4.2 ms per cycle for one H200's 26 calls, which was wall time, so
an upper bound; ``benchmarks/real_gpu_check.py`` measures the real CPU per cycle). "before"
reads every value every run, one call each (the collector before issue 39); "after" is the
collector as shipped: slow values every 10th run, their counters in one field-values call
(assumed to cost one call plus a tenth per field). Target: eight GPUs at 1 s under 0.5% of a
core.

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


def collectors(call_s: float) -> list[tuple[str, Collector]]:
    kmsg = Path("/dev/kmsg") if os.access("/dev/kmsg", os.R_OK) else FIXTURES / "kmsg/kmsg.txt"
    return [
        ("host (this machine)", HostCollector("c", "n")),
        ("nic (this machine)", NicCollector("c", "n")),
        (IB_FIXTURE, NicCollector("c", "n", sys_root=FIXTURES / "nic/sys")),
        ("host_fs (this machine)", FilesystemCollector("c", "n")),
        (f"kmsg ({kmsg})", KmsgCollector("c", "n", path=kmsg)),
        ("gpu, free calls, 8 x H100, NVLinks every run", gpu(0.0, nvlink_interval_s=0)),
        ("gpu, free calls, 8 x H100, NVLinks every 10 s", gpu(0.0)),
        ("gpu, 1 x H200 (no NVLink), before", gpu(call_s, gpus=1, nvlinks=0, before=True)),
        ("gpu, 1 x H200 (no NVLink), after", gpu(call_s, gpus=1, nvlinks=0)),
        ("gpu, 8 x H200 (no NVLink), before", gpu(call_s, nvlinks=0, before=True)),
        ("gpu, 8 x H200 (no NVLink), after", gpu(call_s, nvlinks=0)),
        ("gpu, 8 x H100 (18 NVLinks), before", gpu(call_s, before=True)),
        ("gpu, 8 x H100 (18 NVLinks), after", gpu(call_s)),
    ]


def gpu(
    call_s: float, *, gpus: int = 8, nvlinks: int = 18, before: bool = False, **options: float
) -> GpuCollector:
    nvml = FakeNvml.h100_node(gpus)
    nvml.call_cost_s = call_s
    for state in nvml.gpus:
        state.nvlinks = nvlinks
        if before:  # no field values: every counter one call, as the collector used to
            state.unsupported.add("field_values")
    return GpuCollector("c", "n", nvml=nvml, slow_every=1 if before else 10, **options)


def cpu_per_cycle(collector: Collector, cycles: int) -> tuple[float, int, float]:
    sink_bytes = 0

    def sink(points: list[Point]) -> None:
        nonlocal sink_bytes
        sink_bytes += len(encode_many(points))  # the agent's real work includes encoding

    agent = Agent([collector], sink, cluster="c", node="n")
    agent.run_once()  # warm-up: first reads, NVML init, identity
    nvml = getattr(collector, "nvml", None)
    calls_before = getattr(nvml, "calls", 0)
    started = time.process_time()
    for _ in range(cycles):
        agent.run_once()
    calls = (getattr(nvml, "calls", 0) - calls_before) / cycles
    return (time.process_time() - started) / cycles, sink_bytes // (cycles + 1), calls


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--nvml-call-us", type=float, default=160.0,
                        help="CPU per NVML call in the costed GPU rows")  # fmt: skip
    args = parser.parse_args()
    header = f"{'collector':<50} {'CPU ms/run':>10} {'% core @1s':>10} {'bytes/run':>10}"
    print(f"{header} {'NVML calls/run':>14}")
    results = {}
    for label, collector in collectors(args.nvml_call_us / 1e6):
        seconds, size, calls = cpu_per_cycle(collector, args.cycles)
        results[label] = seconds
        row = f"{label:<50} {seconds * 1e3:>10.3f} {seconds * 100:>10.3f} {size:>10}"
        print(f"{row} {calls:>14.1f}" if calls else row)
    host_nic = results["host (this machine)"] + results["nic (this machine)"]
    host_nic_ib = results["host (this machine)"] + results[IB_FIXTURE]
    print(f"host + nic (this machine) at 1 s: {host_nic * 100:.3f}% of one core (target < 1%)")
    print(f"host + nic (IB fixture) at 1 s:   {host_nic_ib * 100:.3f}% of one core (target < 1%)")
    for node in ("8 x H200 (no NVLink)", "8 x H100 (18 NVLinks)"):
        before, after = results[f"gpu, {node}, before"], results[f"gpu, {node}, after"]
        print(f"gpu, {node}, {args.nvml_call_us:.0f} µs a call, at 1 s: before "
              f"{before:.2%}, after {after:.2%} of one core (target < 0.5%)")  # fmt: skip
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"agent RSS: {rss_mib():.1f} MiB (peak {peak:.1f} MiB)")


if __name__ == "__main__":
    main()
