"""Host telemetry as /proc shows it: CPU shares, memory, load averages and pressure stalls;
with ``disks``, the local NVMe's ``host_disk`` counters from /proc/diskstats.

Load averages are exponentially damped like the kernel's, so they carry state from block to
block; everything else is a per-second sample.

>>> from reflex_localize.simulator.scenario import load_scenario
>>> from reflex_localize.simulator.cluster import build_cluster
>>> HostTelemetry(build_cluster(load_scenario("demo"))).cpus
192
"""

from __future__ import annotations

import numpy as np

from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator.cluster import ClusterSpec
from reflex_localize.simulator.telemetry import BlockInput, Counters, frame, noise, ratio, tag

MEMORY_TOTAL_BYTES = 2 * 1024**4
LOAD_WINDOWS_S = (60.0, 300.0, 900.0)
DISK = "nvme0n1"  # the local scratch NVMe that caches dataset shards and stages checkpoints
DISK_READ_BYTES_S = 1.5e8  # data loading from the local shard cache while training
DISK_WRITE_BYTES_S = 1.5e9  # checkpoint staging


class HostTelemetry:
    cpus = 192

    def __init__(self, cluster: ClusterSpec, *, disks: bool = False) -> None:
        self.disks = disks
        self.disk_counters = Counters()
        self.disk_tags = {
            "cluster": tag([cluster.name] * len(cluster.nodes)),
            "node": tag([n.name for n in cluster.nodes]),
            "device": tag([DISK] * len(cluster.nodes)),
        }
        self.nodes = len(cluster.nodes)
        self.gpus = cluster.gpus_per_node
        self.tags = {
            "cluster": tag([cluster.name] * self.nodes),
            "node": tag([n.name for n in cluster.nodes]),
        }
        self.load = np.zeros((3, self.nodes))
        self.started = False

    def frames(self, block: BlockInput) -> list[Frame]:
        rng, state = block.rng, block.host
        shape = (block.seconds, self.nodes)
        busy = block.util.reshape(block.seconds, self.nodes, self.gpus).mean(axis=2)
        ckpt = block.checkpointing

        def jitter(sigma: float) -> np.ndarray:
            return np.abs(noise(rng, shape, sigma))

        cpu = ratio(0.08 + 0.3 * busy + state.get("cpu_busy") + noise(rng, shape, 0.01))
        runnable = cpu * self.cpus + state.get("load") + noise(rng, shape, 2.0)
        available = MEMORY_TOTAL_BYTES * (0.82 - 0.25 * busy) * state.get("mem_available")
        fields = {
            "cpu_busy_ratio": cpu,
            "cpu_iowait_ratio": ratio(0.002 + state.get("iowait") + 0.12 * ckpt + jitter(0.002)),
            "cpu_steal_ratio": np.zeros(shape),
            "memory_total_bytes": np.full(shape, MEMORY_TOTAL_BYTES, dtype=np.int64),
            "memory_available_bytes": (available * (1 + noise(rng, shape, 0.003))).astype(np.int64),
            **self._loads(np.maximum(runnable, 0)),
            "procs_running": np.maximum(np.round(runnable), 1).astype(np.int64),
            "psi_cpu_some_avg10_ratio": ratio(
                0.01 + 0.02 * busy + state.get("psi_cpu") + jitter(0.005)
            ),
            "psi_memory_some_avg10_ratio": ratio(state.get("psi_memory") + jitter(0.001)),
            "psi_memory_full_avg10_ratio": ratio(state.get("psi_memory_full") + jitter(0.0005)),
            "psi_io_some_avg10_ratio": ratio(
                0.005 + state.get("psi_io") + 0.25 * ckpt + jitter(0.004)
            ),
            "psi_io_full_avg10_ratio": ratio(
                0.001 + state.get("psi_io_full") + 0.1 * ckpt + jitter(0.002)
            ),
        }
        host = frame(
            "host", block, self.tags, {k: np.broadcast_to(v, shape) for k, v in fields.items()}
        )
        return [host, self._disk_frame(block, busy)] if self.disks else [host]

    def _disk_frame(self, block: BlockInput, busy: np.ndarray) -> Frame:
        """Reads follow training, writes follow checkpoints; a failing disk is busy most of
        every second for a fraction of its throughput (``disk_busy``, ``disk_throughput``)."""
        rng, state, ckpt = block.rng, block.host, block.checkpointing
        shape = (block.seconds, self.nodes)
        speed = state.get("disk_throughput")
        jitter = 1 + np.abs(noise(rng, shape, 0.1))
        read = DISK_READ_BYTES_S * busy * speed * jitter
        written = DISK_WRITE_BYTES_S * ckpt * speed * jitter
        busy_share = np.clip(0.02 + 0.08 * busy + 0.6 * ckpt + state.get("disk_busy"), 0, 1)
        add = self.disk_counters.add
        io_ms = add("io_ms", busy_share * 1000, rng, poisson=False)
        fields = {
            "read_bytes": add("read", read, rng, poisson=False),
            "written_bytes": add("written", written, rng, poisson=False),
            "io_time_seconds": io_ms / 1000.0,  # /proc/diskstats counts milliseconds
        }
        return frame("host_disk", block, self.disk_tags, fields)

    def _loads(self, runnable: np.ndarray) -> dict[str, np.ndarray]:
        """The kernel's damped averages of runnable tasks, updated every second."""
        if not self.started:
            self.load[:] = runnable[0]
            self.started = True
        out = np.empty((3, *runnable.shape))
        for w, window in enumerate(LOAD_WINDOWS_S):
            decay = np.exp(-1.0 / window)
            for second in range(runnable.shape[0]):
                self.load[w] = self.load[w] * decay + runnable[second] * (1 - decay)
                out[w, second] = self.load[w]
        return {name: np.round(out[w], 2) for w, name in enumerate(("load1", "load5", "load15"))}
