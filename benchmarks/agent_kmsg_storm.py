"""The node agent under a kmsg storm: 8 fake GPUs, 8 InfiniBand ports, 1,000 kernel lines/s.

Runs the real Agent loop (host, nic, kmsg and gpu collectors at their 1 s intervals) for
``--seconds`` while a thread appends 1,000 kmsg records a second (one in ten an XID or link
event, the rest noise) to the kmsg file the collector reads. Points go to a counting sink (the
writer's cost is measured by benchmarks/write_throughput.py). Prints CPU use (process CPU
seconds per wall second), RSS at start and end and its peak, and the points produced.

    .venv/bin/python benchmarks/agent_kmsg_storm.py --seconds 30
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import threading
import time
from pathlib import Path

import psutil

from reflex_localize.collectors.agent import Agent
from reflex_localize.collectors.base import Collector
from reflex_localize.collectors.gpu import GpuCollector
from reflex_localize.collectors.host import HostCollector
from reflex_localize.collectors.kmsg import KmsgCollector
from reflex_localize.collectors.nic import NicCollector
from reflex_localize.collectors.nvml_fake import FakeNvml

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
NOISE = "6,{seq},{usec},-;usb 1-1: device descriptor read/64, error -71"
XID = "4,{seq},{usec},-;NVRM: Xid (PCI:0000:3b:00): 94, pid=1234, name=python, Contained ECC"


def _eight_port_sys(root: Path) -> Path:
    sys_root = root / "sys"
    shutil.copytree(FIXTURES / "nic" / "sys", sys_root, symlinks=True)
    infiniband = sys_root / "class" / "infiniband"
    template = infiniband / "mlx5_0"
    for index in range(8):
        target = infiniband / f"mlx5_{index}"
        if not target.exists():
            shutil.copytree(template, target, symlinks=True)
    return sys_root


def _storm(path: Path, rate: int, stop: threading.Event, written: list[int]) -> None:
    seq = 0
    with path.open("a") as handle:
        while not stop.is_set():
            started = time.monotonic()
            lines = []
            for _ in range(rate // 10):  # ten bursts a second
                seq += 1
                template = XID if seq % 10 == 0 else NOISE
                lines.append(template.format(seq=seq, usec=seq * 1000) + "\n")
            handle.write("".join(lines))
            handle.flush()
            written[0] += len(lines)
            stop.wait(max(0.0, 0.1 - (time.monotonic() - started)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=int, default=1000, help="kmsg lines per second")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="reflex-storm-"))
    kmsg = root / "kmsg"
    kmsg.touch()
    produced = [0]
    collectors: list[Collector] = [
        HostCollector("c1", "n1", proc_root=FIXTURES / "host" / "proc"),
        NicCollector("c1", "n1", sys_root=_eight_port_sys(root)),
        KmsgCollector("c1", "n1", path=kmsg, proc_root=FIXTURES / "kmsg" / "proc"),
        GpuCollector("c1", "n1", nvml=FakeNvml.h100_node(gpus=8)),
    ]
    agent = Agent(collectors, lambda points: produced.__setitem__(0, produced[0] + len(points)),
                  cluster="c1", node="n1")  # fmt: skip
    me = psutil.Process()
    stop, written = threading.Event(), [0]
    storm = threading.Thread(target=_storm, args=(kmsg, args.rate, stop, written), daemon=True)
    storm.start()
    rss_start = me.memory_info().rss
    cpu_start, wall_start = time.process_time(), time.monotonic()
    rss_samples = []
    timer = threading.Timer(args.seconds, stop.set)
    timer.start()
    while not stop.is_set():
        stop.wait(agent.tick())
        rss_samples.append(me.memory_info().rss)
    storm.join()
    wall = time.monotonic() - wall_start
    cpu = time.process_time() - cpu_start  # includes the storm writer thread: an upper bound
    events = agent.states[2].runs
    rate = written[0] / wall
    print(f"agent kmsg storm: {wall:.1f} s wall, {written[0]} kmsg lines written "
          f"({rate:.0f}/s), {produced[0]} points produced, {events} kmsg runs")  # fmt: skip
    print(f"CPU: {cpu / wall * 100:.1f}% of one core (agent + storm writer thread)")
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"RSS: start {rss_start / 2**20:.1f} MiB, end {rss_samples[-1] / 2**20:.1f} MiB, "
          f"peak {max(rss_samples) / 2**20:.1f} MiB (ru_maxrss {max_rss:.1f} MiB)")  # fmt: skip
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
