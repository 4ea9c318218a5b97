"""``host`` and ``host_disk`` rows: /proc as a training node sees it (dataloader workers keep
a fifth of the cores busy; a checkpoint adds iowait)."""

from __future__ import annotations

import numpy as np

from testbed import lp
from testbed.activity import CKPT, IDLE, LOADING, TRAIN
from testbed.model import Fleet, Node


class HostState:
    def __init__(self, fleet: Fleet, node: Node, rng: np.random.Generator) -> None:
        self.fleet, self.node, self.rng = fleet, node, rng
        self.cores = 224 if fleet.name == "hgx_ndr" else 128
        self.mem = (2048 if fleet.name == "hgx_ndr" else 1024) * 2**30
        self.load = np.array([1.0, 1.0, 1.0])
        self.read = int(rng.integers(10**12, 10**14))
        self.written = int(rng.integers(10**11, 10**13))
        self.iotime = float(rng.uniform(1e4, 1e6))
        tags = {"cluster": fleet.cluster, "node": node.name, **lp.site(fleet, node)}
        self.head = lp.head("host", tags)
        self.disk_head = lp.head("host_disk", {**tags, "device": "nvme0n1"})

    def rows(self, ts: np.ndarray, phase: np.ndarray, out: list[tuple[int, str]]) -> None:
        fleet, node, rng = self.fleet, self.node, self.rng
        dt = fleet.sample_s
        stamps = fleet.start_ns + np.round((ts + node.skew_s) * 1e9).astype(np.int64)
        for k, t in enumerate(ts.tolist()):
            ph = int(phase[k])
            busy = {IDLE: 0.015, LOADING: 0.45, TRAIN: 0.21, CKPT: 0.33}.get(ph, 0.2)
            busy *= rng.normal(1.0, 0.08)
            iowait = 0.09 if ph == CKPT else 0.004
            avail = 0.95 if ph == IDLE else 0.61
            psi_cpu, psi_mem, psi_mem_full = 0.01, 0.0, 0.0
            psi_io = 0.22 if ph == CKPT else 0.01
            procs = int(busy * self.cores * 0.9) + 2
            for f in fleet.faults:
                if f.node != node.index or not f.start_s <= t < f.end_s:
                    continue
                if f.kind == "host_cpu_contention":
                    busy, psi_cpu = rng.uniform(0.94, 0.99), rng.uniform(0.45, 0.7)
                    procs = int(self.cores * rng.uniform(2.0, 3.0))
                elif f.kind == "host_memory_pressure":
                    avail = rng.uniform(0.01, 0.03)
                    psi_mem, psi_mem_full = rng.uniform(0.3, 0.55), rng.uniform(0.08, 0.25)
                    busy += 0.08
                    iowait += 0.03
            runnable = busy * self.cores + rng.normal(0, 1.0)
            for i, tau in enumerate((60.0, 300.0, 900.0)):
                self.load[i] += (runnable - self.load[i]) * (1 - np.exp(-dt / tau))
            rate_r = {TRAIN: 6e7, LOADING: 1.5e9}.get(ph, 1e5)
            self.read += int(rate_r * dt * rng.uniform(0.7, 1.3))
            self.written += int(2e5 * dt * rng.uniform(0.5, 1.5))
            self.iotime += dt * (0.08 if ph in (TRAIN, LOADING) else 0.002)
            st = int(stamps[k])
            out.append((st, (
                f"{self.head} cpu_busy_ratio={min(busy, 1.0):.4f},cpu_iowait_ratio={iowait:.4f}"
                f",cpu_steal_ratio=0.0,memory_total_bytes={self.mem}i"
                f",memory_available_bytes={int(self.mem * avail * rng.normal(1, 0.002))}i"
                f",load1={self.load[0]:.2f},load5={self.load[1]:.2f},load15={self.load[2]:.2f}"
                f",procs_running={procs}i,psi_cpu_some_avg10_ratio={psi_cpu:.4f}"
                f",psi_memory_some_avg10_ratio={psi_mem:.4f}"
                f",psi_memory_full_avg10_ratio={psi_mem_full:.4f}"
                f",psi_io_some_avg10_ratio={psi_io:.4f}"
                f",psi_io_full_avg10_ratio={psi_io / 4:.4f} {st}"
            )))  # fmt: skip
            out.append((st, (
                f"{self.disk_head} read_bytes={self.read}i,written_bytes={self.written}i"
                f",io_time_seconds={self.iotime:.3f} {st}"
            )))  # fmt: skip
