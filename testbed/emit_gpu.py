"""``gpu`` rows of one node for a chunk of sample times, as NVML would report them."""

from __future__ import annotations

import math

import numpy as np

from testbed import lp
from testbed.activity import CKPT, HANG, IDLE, LOADING, TRAIN
from testbed.model import Fleet, Node

TAU_S = 60.0  # thermal time constant: a GPU taking load warms over minutes


class GpuState:
    def __init__(self, fleet: Fleet, node: Node, rng: np.random.Generator) -> None:
        self.fleet, self.node, self.rng = fleet, node, rng
        m = node.model
        self.temp = np.full(8, 31.0) + rng.normal(0, 1.0, 8)
        self.offset = rng.normal(0, 1.6, 8) + (np.arange(8) >= 4) * 1.5  # airflow: back GPUs warmer
        if node.warm_gpu is not None:
            self.offset[node.warm_gpu] += 3.0
        self.leaky = rng.random(8) < 0.12  # a few GPUs log a corrected ECC error now and then
        self.ecc_vol = np.zeros(8, dtype=np.int64)
        self.ecc_unc = np.zeros(8, dtype=np.int64)
        self.ecc_agg = rng.integers(0, 40, 8)
        self.remap_c = rng.choice([0, 0, 0, 0, 1, 2], 8)
        self.remap_u = np.zeros(8, dtype=np.int64)
        self.pending = np.zeros(8, dtype=bool)
        self.replay = rng.integers(0, 3, 8).astype(np.int64)
        self.heads = [
            lp.head(
                "gpu",
                {
                    "cluster": fleet.cluster,
                    "node": node.name,
                    "gpu": str(g),
                    "profile": m.profile,
                    **lp.site(fleet, node),
                },
            )
            for g in range(8)
        ]
        self.static = (
            f",memory_total_bytes={m.memory_bytes}i,sm_clock_max_mhz={m.sm_clock_max}i"
            f",memory_clock_max_mhz={m.mem_clock_max}i,power_limit_watts={m.power_limit}"
            f",temperature_slowdown_celsius={m.slowdown_c},pcie_link_gen_max={m.pcie_gen}i"
            f",pcie_link_width_max=16i,nvlink_active_links={m.nvlinks}i"
        )

    def rows(self, ts: np.ndarray, phase: np.ndarray, frac: np.ndarray,
             out: list[tuple[int, str]]) -> None:  # fmt: skip
        fleet, node, rng, m = self.fleet, self.node, self.rng, self.node.model
        n = len(ts)
        ratio = np.ones((n, 8))
        reasons = np.zeros((n, 8), dtype=np.int64)
        hot = np.zeros((n, 8))
        width = np.full((n, 8), 16)
        lost = np.zeros((n, 8), dtype=bool)
        for f in fleet.faults:
            if f.node != node.index or f.component != "gpu":
                continue
            g = int(f.index)
            on = (ts >= f.start_s) & (ts < f.end_s)
            if f.kind == "gpu_fail_slow":
                ratio[on, g] = 1.0 / (1.0 + f.severity)
                if int(f.severity * 1000) % 2:  # half report HW slowdown, half nothing at all
                    reasons[on, g] |= 0x8
            elif f.kind == "thermal_throttle":
                ratio[on, g] = f.severity
                reasons[on, g] |= 0x20 | 0x40
                hot[on, g] = 1.0
            elif f.kind == "pcie_downtrain":
                width[on, g] = 8
                self.replay[g] += int(on.sum() * fleet.sample_s * rng.uniform(5, 40))
            elif f.kind == "xid79":
                lost[ts >= f.start_s + 1.0, g] = True
            elif f.kind == "hbm_uncorrectable" and (ts >= f.start_s).any() and not self.pending[g]:
                self.ecc_unc[g] += 2
                self.remap_u[g] += 1
                self.pending[g] = True
        train = (phase == TRAIN)[:, None]
        busy = np.broadcast_to(train, (n, 8)).astype(float)
        power_cap = rng.random((n, 8)) < 0.22
        util = np.where(train, np.clip(rng.normal(0.965, 0.015, (n, 8)), 0, 1), 0.0)
        util = np.where((phase == LOADING)[:, None], rng.uniform(0.05, 0.3, (n, 8)), util)
        util = np.where((phase == CKPT)[:, None], rng.uniform(0.0, 0.05, (n, 8)), util)
        util = np.where((phase == HANG)[:, None], 1.0, util)
        clock = np.full((n, 8), float(m.sm_clock_max))
        clock = np.where(train & power_cap, clock * rng.uniform(0.9, 0.98, (n, 8)), clock)
        reasons |= np.where(train & power_cap, 0x4, 0)
        idle = (phase == IDLE)[:, None] | (phase == CKPT)[:, None]
        clock = np.where((phase == IDLE)[:, None], m.idle_clock, clock)
        reasons |= np.where(idle, 0x1, 0)
        clock = np.where(busy > 0, clock * ratio, clock)
        span = m.power_limit * 0.93 - m.idle_power
        power = m.idle_power + span * (0.55 + 0.45 * frac) * ratio**1.5 * busy
        power = np.where((phase == LOADING)[:, None], m.idle_power + 60.0, power)
        power = np.where((phase == CKPT)[:, None], m.idle_power + 25.0, power)
        power = np.where((phase == HANG)[:, None], m.power_limit * 0.42, power)
        power = np.where(busy > 0, power, np.maximum(power, m.idle_power))
        power = power * rng.normal(1.0, 0.02, (n, 8))
        day = (fleet.start_ns / 1e9 + ts) % 86400.0
        diurnal = 1.2 * np.sin(2 * np.pi * (day - 6 * 3600) / 86400.0)[:, None]
        target = 30.0 + 34.0 * (power - m.idle_power) / (m.power_limit - m.idle_power)
        target = target + self.offset + diurnal
        target = np.where(hot > 0, m.slowdown_c - 1.0 + rng.normal(0, 0.4, (n, 8)), target)
        alpha = 1.0 - math.exp(-fleet.sample_s / TAU_S)
        temps = np.empty((n, 8))
        for k in range(n):
            self.temp += (target[k] - self.temp) * alpha
            temps[k] = self.temp
        temps = np.where(hot > 0, np.maximum(temps, m.slowdown_c - 3.0), temps)
        gen = np.full((n, 8), m.pcie_gen)
        if fleet.name == "aisle_hdr":  # A100s here drop their link to Gen1 when idle
            gen = np.where((phase == IDLE)[:, None], 1, gen)
        memused = np.where((phase == IDLE)[:, None], 4 * 2**20 + 0 * frac,
                           m.memory_bytes * rng.normal(0.86, 0.003, (n, 8)))  # fmt: skip
        memutil = np.where(train, 0.3 + 0.3 * frac, util * 0.2)
        if self.leaky.any():
            self.ecc_vol += self.leaky * rng.poisson(n * fleet.sample_s / 1800.0, 8)
        stamps = fleet.start_ns + np.round((ts + node.skew_s) * 1e9).astype(np.int64)
        mem_clock = m.mem_clock_max
        for k in range(n):
            st = int(stamps[k])
            for g in range(8):
                if lost[k, g]:
                    continue
                agg = int(self.ecc_agg[g] + self.ecc_vol[g])
                out.append((st, (
                    f"{self.heads[g]} utilization_gpu_ratio={util[k, g]:.3f}"
                    f",utilization_memory_ratio={memutil[k, g]:.3f}"
                    f",memory_used_bytes={int(memused[k, g])}i,sm_clock_mhz={int(clock[k, g])}i"
                    f",memory_clock_mhz={mem_clock}i,power_watts={power[k, g]:.1f}"
                    f",temperature_celsius={temps[k, g]:.1f}"
                    f",memory_temperature_celsius={temps[k, g] + 6.5:.1f}"
                    f",clocks_event_reasons={int(reasons[k, g])}i"
                    f",ecc_corrected_volatile={int(self.ecc_vol[g])}i"
                    f",ecc_uncorrected_volatile={int(self.ecc_unc[g])}i"
                    f",ecc_corrected_aggregate_total={agg}i"
                    f",ecc_uncorrected_aggregate_total={int(self.ecc_unc[g])}i"
                    f",remapped_rows_correctable={int(self.remap_c[g])}i"
                    f",remapped_rows_uncorrectable={int(self.remap_u[g])}i"
                    f",remapped_rows_pending={'true' if self.pending[g] else 'false'}"
                    f",remapped_rows_failure=false,pcie_link_gen={int(gen[k, g])}i"
                    f",pcie_link_width={int(width[k, g])}i"
                    f",pcie_replay_errors={int(self.replay[g])}i"
                    f"{self.static} {st}"
                )))  # fmt: skip
