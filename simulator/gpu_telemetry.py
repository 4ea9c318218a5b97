"""GPU telemetry as NVML would report it: ``gpu`` every second, ``gpu_nvlink`` every 10 s,
``gpu_info`` once. Values follow each GPU's hardware profile, so a mixed fleet looks mixed.

A GPU that fell off the bus stops reporting, as a real collector gets ``GpuIsLost``.

>>> from reflex_localize.simulator.scenario import load_scenario
>>> from reflex_localize.simulator.cluster import build_cluster
>>> gpus = GpuTelemetry(build_cluster(load_scenario("demo")), seed=0)
>>> len(gpus.info_frame(0).time_ns)
256
"""

from __future__ import annotations

import numpy as np

from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator.cluster import ClusterSpec
from reflex_localize.simulator.effects import BlockState
from reflex_localize.simulator.telemetry import (
    BlockInput,
    Counters,
    frame,
    kept_rows,
    noise,
    tag,
)
from reflex_localize.simulator.topology import GpuTopology, pci_bus_id

NVLINK_EVERY_S = 10  # reading every link's counters is expensive; real collectors do it rarely
IDLE_CLOCK_RATIO = 0.25
# Ampere and later remap rows; older GPUs retire pages. The same repairs feed both.
REMAP_FIELDS = {
    "remapped_rows_correctable": "correctable",
    "remapped_rows_uncorrectable": "uncorrectable",
    "remapped_rows_pending": "pending",
    "remapped_rows_failure": "failure",
}
RETIRED_FIELDS = {
    "retired_pages_sbe": "correctable",
    "retired_pages_dbe": "uncorrectable",
    "retired_pages_pending": "pending",
}
DRIVER_VERSION = "550.90.07"


class GpuTelemetry:
    """``info = False``: the agent never writes ``gpu_info`` (an NVML identity read that failed,
    an older agent). ``topology``: it writes ``gpu_topology`` at start and then rarely."""

    def __init__(
        self, cluster: ClusterSpec, seed: int, *, info: bool = True, topology: bool = False
    ) -> None:
        rng = np.random.default_rng([seed, 101])
        per_node = cluster.profiles()
        gpus = cluster.gpus_per_node
        profile = [p for p in per_node for _ in range(gpus)]
        self.cluster = cluster
        self.count = len(profile)
        self.node = np.repeat(np.arange(len(per_node)), gpus)
        self.local = np.tile(np.arange(gpus), len(per_node))

        def limit(name: str) -> np.ndarray:
            return np.array([p.limits[name] for p in profile])

        self.clock_max = limit("sm_clock_max_mhz")
        self.mem_clock_max = limit("memory_clock_max_mhz")
        self.power_limit = limit("power_limit_watts")
        self.slowdown = limit("temperature_slowdown_celsius")
        self.gen_max = limit("pcie_link_gen_max")
        self.width_max = limit("pcie_link_width_max")
        self.mem_total = np.array([p.memory_total_bytes for p in profile], dtype=np.int64)
        self.nvlinks = np.array([p.nvlink_count for p in profile])
        self.remaps = np.array([p.has("remapped_rows") for p in profile])
        # Each node's airflow differs a little: a static per-node temperature offset.
        self.temp_base = 32.0 + np.repeat(rng.normal(0, 1.2, len(per_node)), gpus)
        self.ecc_lifetime = rng.poisson(3.0, self.count).astype(np.int64)
        self.rows_initial = rng.poisson(0.3, self.count).astype(np.int64)
        self.tags = {
            "cluster": tag([cluster.name] * self.count),
            "node": tag([cluster.nodes[n].name for n in self.node]),
            "gpu": tag([str(i) for i in self.local]),
            "profile": tag([p.name for p in profile]),
        }
        self.link_gpu = np.repeat(np.arange(self.count), self.nvlinks)
        self.link_no = np.concatenate([np.arange(n) for n in self.nvlinks])
        self.link_tags = {
            "cluster": self.tags["cluster"][self.link_gpu],
            "node": self.tags["node"][self.link_gpu],
            "gpu": self.tags["gpu"][self.link_gpu],
            "link": tag([str(i) for i in self.link_no]),
        }
        self.counters = Counters()
        self.unread_link_errors = np.zeros((2, self.count))  # CRC and replay since last read
        self.uuid_seed = seed
        self.info = info
        self.topology = GpuTopology(cluster) if topology else None

    def info_frame(self, time_ns: int) -> Frame:
        names = [
            p.match[0] for p in self.cluster.profiles() for _ in range(self.cluster.gpus_per_node)
        ]
        # Stable per seed and GPU; the tail scatters the bits like a real UUID does.
        uuids = [
            f"GPU-{self.uuid_seed & 0xFFFF:04x}{g:04x}-5eed-4a11-9c1e-"
            f"{g * 2654435761 & 0xFFFFFFFFFFFF:012x}"
            for g in range(self.count)
        ]
        fields = {
            "uuid": tag(uuids),
            "serial": tag([f"165{g:010d}" for g in range(self.count)]),
            "pci_bus_id": tag([pci_bus_id(int(i)) for i in self.local]),
            "name": tag(["NVIDIA " + n for n in names]),
            "driver_version": tag([DRIVER_VERSION] * self.count),
        }
        rows = Frame("gpu_info", np.full(self.count, time_ns, np.int64), dict(self.tags), fields)
        return rows if self.info else rows.take(np.zeros(self.count, dtype=bool))

    def frames(self, block: BlockInput) -> list[Frame]:
        fields, present = self._gpu_fields(block)
        repair = self._memory_repair(block)
        frames = []
        for remaps in (True, False):
            columns = self.remaps == remaps
            if not columns.any():
                continue
            names = REMAP_FIELDS if remaps else RETIRED_FIELDS
            group = {**fields, **{name: repair[key] for name, key in names.items()}}
            tags = {name: values[columns] for name, values in self.tags.items()}
            sliced = {name: values[:, columns] for name, values in group.items()}
            frames.append(frame("gpu", block, tags, sliced, present[:, columns]))
        frames.extend(self._nvlink_frames(block, present))
        if self.topology is not None:
            due = self.topology.due(block.first_s, block.seconds)
            if due is not None:
                topology = self.topology.frame(int(block.times_ns[due - block.first_s]))
                frames += kept_rows([topology], block.kept)
        return frames

    def _gpu_fields(self, block: BlockInput) -> tuple[dict[str, np.ndarray], np.ndarray]:
        rng, shape, state = block.rng, (block.seconds, self.count), block.gpu
        busy = block.util > 0.05
        clock_factor = state.array("clock")
        clock_ratio = np.where(busy, 0.985, IDLE_CLOCK_RATIO) * clock_factor
        sm_clock = np.round(self.clock_max * np.clip(clock_ratio + noise(rng, shape, 0.003), 0, 1))
        idle_power = 0.1 * self.power_limit
        power = idle_power + (0.82 * self.power_limit - idle_power) * block.util * state.get(
            "power"
        )
        limit = self._enforced_power_limit(state)
        power = np.clip(power * (1 + noise(rng, shape, 0.015)), 0.6 * idle_power, limit)
        if state.touched("power_limit"):  # a capped GPU hovers just under its limit
            held = power >= limit
            power = np.where(held, limit * (1 - np.abs(noise(rng, shape, 0.005))), power)
        temp = self.temp_base + 45.0 * power / self.power_limit + state.get("temp")
        temp = temp + noise(rng, shape, 0.3)
        util = np.where(block.util > 0, block.util + noise(rng, shape, 0.01), 0.0)
        used = np.where(block.allocated, 0.78, 0.007) * self.mem_total
        ecc_corr = self.counters.add("ecc_c", 2e-4 + state.array("ecc_corrected"), rng)
        ecc_uncorr = self.counters.add("ecc_u", state.array("ecc_uncorrected"), rng, poisson=False)
        down = np.minimum(state.array("nvlink_down"), self.nvlinks)
        self._count_link_errors(block)
        fields = {
            "utilization_gpu_ratio": np.round(np.clip(util, 0, 1), 2),
            "utilization_memory_ratio": np.round(np.clip(0.6 * util, 0, 1), 2),
            "memory_used_bytes": (used * (1 + np.abs(noise(rng, shape, 0.002)))).astype(np.int64),
            "memory_total_bytes": np.broadcast_to(self.mem_total, shape),
            "sm_clock_mhz": sm_clock.astype(np.int64),
            "sm_clock_max_mhz": np.broadcast_to(self.clock_max.astype(np.int64), shape),
            "memory_clock_mhz": np.broadcast_to(self._memory_clock(state), shape),
            "memory_clock_max_mhz": np.broadcast_to(self.mem_clock_max.astype(np.int64), shape),
            "power_watts": np.round(power, 2),
            "power_limit_watts": np.broadcast_to(limit, shape),
            "temperature_celsius": np.round(temp, 1),
            "temperature_slowdown_celsius": np.broadcast_to(self.slowdown, shape),
            "memory_temperature_celsius": np.round(temp + 5.0 + noise(rng, shape, 0.3), 1),
            "clocks_event_reasons": state.array("throttle").astype(np.int64),
            "ecc_corrected_volatile": ecc_corr,
            "ecc_uncorrected_volatile": ecc_uncorr,
            "ecc_corrected_aggregate_total": ecc_corr + self.ecc_lifetime,
            "ecc_uncorrected_aggregate_total": ecc_uncorr,
            "pcie_link_gen": np.minimum(self.gen_max, state.get("pcie_gen")).astype(np.int64),
            "pcie_link_gen_max": np.broadcast_to(self.gen_max.astype(np.int64), shape),
            "pcie_link_width": np.minimum(self.width_max, state.get("pcie_width")).astype(np.int64),
            "pcie_link_width_max": np.broadcast_to(self.width_max.astype(np.int64), shape),
            "pcie_replay_errors": self.counters.add(
                "replay", 5e-4 + state.array("pcie_replay"), rng
            ),
            "nvlink_active_links": (self.nvlinks - down).astype(np.int64),
        }
        present = state.array("lost") <= 0
        return {k: np.broadcast_to(v, shape) for k, v in fields.items()}, present

    def _enforced_power_limit(self, state: BlockState) -> np.ndarray:
        """The profile's default limit, or a lower one an operator or a policy enforced."""
        if not state.touched("power_limit"):
            return self.power_limit
        return np.round(self.power_limit * state.array("power_limit"), 0)

    def _memory_clock(self, state: BlockState) -> np.ndarray:
        """HBM runs at its maximum clock under load unless stuck in a lower P-state."""
        if not state.touched("mem_clock"):
            return self.mem_clock_max.astype(np.int64)
        return np.round(self.mem_clock_max * state.array("mem_clock")).astype(np.int64)

    def _memory_repair(self, block: BlockInput) -> dict[str, np.ndarray]:
        """Spare-row use, whichever way the GPU reports it (remapped rows or retired pages)."""
        state, rng = block.gpu, block.rng
        shape = (block.seconds, self.count)
        return {
            "correctable": self.counters.add(
                "rows_c", state.array("remap_correctable"), rng, start=self.rows_initial
            ),
            "uncorrectable": self.counters.add(
                "rows_u", state.array("remap_uncorrectable"), rng, poisson=False
            ),
            "pending": np.broadcast_to(state.array("remap_pending") > 0, shape),
            "failure": np.broadcast_to(state.array("remap_failure") > 0, shape),
        }

    def _count_link_errors(self, block: BlockInput) -> None:
        crc = 1e-3 + block.gpu.array("nvlink_crc")
        self._link_rates = np.cumsum(crc, axis=0)  # expected errors per GPU up to each second

    def _nvlink_frames(self, block: BlockInput, present: np.ndarray) -> list[Frame]:
        seconds = block.first_s + np.arange(block.seconds)
        reads = np.flatnonzero(seconds % NVLINK_EVERY_S == 0)
        if not len(reads):
            self.unread_link_errors[0] += self._link_rates[-1]
            return []
        rng, state = block.rng, block.gpu
        links = len(self.link_gpu)
        expected = self._link_rates[reads] + self.unread_link_errors[0]
        since_last = np.diff(expected, axis=0, prepend=np.zeros((1, self.count)))
        self.unread_link_errors[0] = self._link_rates[-1] - self._link_rates[reads[-1]]
        per_link = since_last[:, self.link_gpu] / self.nvlinks[self.link_gpu]
        down = np.minimum(state.array("nvlink_down")[reads], self.nvlinks)
        active = self.link_no < (self.nvlinks - down)[:, self.link_gpu]
        shape = (len(reads), links)
        fields = {
            "active": active,
            "crc_flit_errors": self.counters.add("nvl_flit", per_link, rng, shape),
            "crc_data_errors": self.counters.add("nvl_data", per_link * 0.3, rng, shape),
            "replay_errors": self.counters.add("nvl_replay", per_link * 0.5, rng, shape),
            "recovery_errors": self.counters.add("nvl_recovery", (~active) * 0.01, rng, shape),
        }
        sub = BlockInput(
            **{**block.__dict__, "times_ns": block.times_ns[reads], "seconds": len(reads)}
        )
        keep = present[reads][:, self.link_gpu]
        return [frame("gpu_nvlink", sub, self.link_tags, fields, keep)]
