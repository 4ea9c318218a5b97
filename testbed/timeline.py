"""Each job's steps, rank by rank: synchronous training waits for its slowest rank, so a slow
part slows every step, and the other ranks' wait shows as communication time."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from testbed.model import Fleet, Job, Segment

RANKS_PER_NODE = 8
WARMUP = (2.6, 1.5, 1.15)  # first steps of a launch: autotuning, allocator, data pipeline fill


@dataclass
class Steps:
    """The steps of one segment; arrays of shape (steps,) or (steps, ranks)."""

    job: Job
    seg: Segment
    number: np.ndarray
    start: np.ndarray
    end: np.ndarray
    ckpt: np.ndarray  # seconds of checkpoint in the step
    compute: np.ndarray
    data: np.ndarray
    comm: np.ndarray
    opt: np.ndarray
    loss: np.ndarray

    @property
    def ranks(self) -> int:
        return len(self.seg.nodes) * RANKS_PER_NODE


def layout(job: Job, rank: int, world: int) -> tuple[int, int, int]:
    """(dp, pp, tp) rank in Megatron-LM order: tensor ranks adjacent, then data, then stages."""
    dp_size = world // (job.tp * job.pp)
    return (rank // job.tp) % dp_size, rank // (job.tp * dp_size), rank % job.tp


def _comm_factor(fleet: Fleet, seg: Segment, t: float) -> float:
    nodes = set(seg.nodes)
    factor = 1.0
    for f in fleet.faults:
        if f.node not in nodes or not f.start_s <= t < f.end_s:
            continue
        if f.kind in ("ib_degraded_speed", "pcie_downtrain"):
            factor *= f.severity
        elif f.kind == "ib_link_flap":
            down = any(a <= t < b + 3.0 for a, b in f.episodes)
            factor *= 4.0 if down else f.severity
    for b in fleet.benign:
        if b.kind == "fabric_congestion" and b.start_s <= t < b.end_s:
            share = len(nodes & set(b.nodes)) / len(nodes)
            if share >= 0.3:
                factor *= b.factor
    return factor


def _ckpt_factor(fleet: Fleet, t: float) -> float:
    slow = (b.factor for b in fleet.benign if b.kind == "shared_fs_slow_checkpoint"
            and b.start_s <= t < b.end_s)  # fmt: skip
    return next(slow, 1.0)


def _rank_factors(fleet: Fleet, seg: Segment, t: float) -> tuple[np.ndarray, np.ndarray]:
    """Compute and data multipliers of each rank from the faults active at ``t``."""
    ranks = len(seg.nodes) * RANKS_PER_NODE
    comp = np.ones(ranks)
    data = np.ones(ranks)
    where = {n: i for i, n in enumerate(seg.nodes)}
    for f in fleet.faults:
        if f.node not in where or not f.start_s <= t < f.end_s:
            continue
        base = where[f.node] * RANKS_PER_NODE
        if f.kind == "gpu_fail_slow":
            comp[base + int(f.index)] *= 1.0 + f.severity
        elif f.kind == "thermal_throttle":
            comp[base + int(f.index)] *= 0.12 + 0.88 / f.severity
        elif f.kind == "host_cpu_contention":
            comp[base : base + RANKS_PER_NODE] *= 1.12
            data[base : base + RANKS_PER_NODE] *= 5.0
        elif f.kind == "host_memory_pressure":
            comp[base : base + RANKS_PER_NODE] *= 1.07
            data[base : base + RANKS_PER_NODE] *= 3.5
    return comp, data


def simulate(fleet: Fleet, job: Job, seg: Segment, rng: random.Random) -> Steps:
    ranks = len(seg.nodes) * RANKS_PER_NODE
    nprng = np.random.default_rng(rng.randrange(1 << 30))
    speed = np.array([fleet.nodes[n].speed[g] for n in seg.nodes for g in range(8)])
    stage = np.ones(ranks)
    if job.pp > 1:
        for r in range(ranks):
            _, pp, _ = layout(job, r, ranks)
            if pp in (0, job.pp - 1):
                stage[r] = 1.0 + job.stage_skew
    c0 = job.step_s * job.compute_frac
    d0 = job.step_s * 0.015
    o0 = job.step_s * 0.03
    m0 = job.step_s * (1.0 - job.compute_frac - 0.045)
    stop = seg.hang_at_s if seg.hang_at_s is not None else seg.end_s
    rows: dict[str, list] = {k: [] for k in ("n", "s", "e", "k", "c", "d", "m", "o", "l")}
    t = seg.start_s + rng.uniform(40.0, 70.0)  # launch: imports, NCCL init, checkpoint load
    number = seg.first_step
    last_hot = np.zeros(0, dtype=np.int64)
    while True:
        i = number - seg.first_step
        comp_f, data_f = _rank_factors(fleet, seg, t)
        diurnal = 1.0 + 0.01 * np.sin(2 * np.pi * ((fleet.start_ns / 1e9 + t) % 86400) / 86400)
        comp = c0 / speed * stage * comp_f * diurnal * nprng.normal(1.0, 0.008, ranks)
        if job.moe:  # the hot experts of this step, on ranks that move every step
            pool = np.setdiff1d(np.arange(ranks), last_hot)
            last_hot = nprng.choice(pool, max(1, ranks // 16), replace=False)
            comp[last_hot] *= nprng.uniform(1.15, 1.4, len(last_hot))
        if i < len(WARMUP):
            comp *= WARMUP[i]
        data = d0 * data_f * nprng.lognormal(0.0, 0.25, ranks)
        opt = o0 * nprng.normal(1.0, 0.01, ranks)
        need = m0 * _comm_factor(fleet, seg, t) * float(nprng.normal(1.0, 0.015))
        ckpt = 0.0
        if number % job.ckpt_every == 0:
            ckpt = job.ckpt_s * _ckpt_factor(fleet, t) * rng.uniform(0.9, 1.15)
        step = float(np.max(comp + data + opt)) + need + ckpt
        if t + step >= stop:
            break
        rows["n"].append(number)
        rows["s"].append(t)
        rows["e"].append(t + step)
        rows["k"].append(ckpt)
        rows["c"].append(comp)
        rows["d"].append(data)
        rows["o"].append(opt)
        rows["m"].append(step - ckpt - comp - data - opt)
        rows["l"].append(2.1 + 7.0 / np.sqrt(number + 10) + nprng.normal(0, 0.02))
        t += step + rng.uniform(0.005, 0.02)
        number += 1
    empty = np.zeros((0, ranks))
    return Steps(
        job, seg, np.array(rows["n"], dtype=np.int64), np.array(rows["s"]), np.array(rows["e"]),
        np.array(rows["k"]), np.array(rows["c"]) if rows["c"] else empty,
        np.array(rows["d"]) if rows["d"] else empty, np.array(rows["m"]) if rows["m"] else empty,
        np.array(rows["o"]) if rows["o"] else empty, np.array(rows["l"]),
    )  # fmt: skip


def simulate_all(fleet: Fleet, rng: random.Random) -> list[Steps]:
    return [simulate(fleet, job, seg, rng) for job in fleet.jobs for seg in job.segments]
