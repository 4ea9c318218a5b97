"""Writes one fleet's line protocol (time-ordered, as a capture) and its labels."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np

from testbed import labels as labels_mod
from testbed.activity import NodeActivity
from testbed.emit_gpu import GpuState
from testbed.emit_host import HostState
from testbed.emit_jobs import crash_rows, membership_rows, step_rows
from testbed.emit_misc import MiscState
from testbed.emit_net import NetState
from testbed.fleets import SPECS, build_fleet
from testbed.model import Fleet
from testbed.timeline import simulate_all

CHUNK_S = 60.0
HOLD_S = 3.0  # more than any node's clock skew: lines stamped later wait for the next chunk


def generate(fleet_name: str, seed: int, out_dir: Path, hours: float | None = None,
             nodes: int | None = None) -> tuple[Path, Path, dict[str, Any]]:  # fmt: skip
    """Builds the fleet, writes ``<fleet>-<seed>.lp`` and ``.labels.json``; returns both paths
    and the labels."""
    fleet = build_fleet(SPECS[fleet_name], seed, hours, nodes)
    out_dir.mkdir(parents=True, exist_ok=True)
    lp_path = out_dir / f"{fleet_name}-{seed}.lp"
    label_path = out_dir / f"{fleet_name}-{seed}.labels.json"
    data = labels_mod.write(fleet, label_path)
    write_lines(fleet, lp_path, seed)
    return lp_path, label_path, data


def write_lines(fleet: Fleet, path: Path, seed: int) -> int:
    rng = random.Random(f"steps:{fleet.name}:{seed}")
    steps = simulate_all(fleet, rng)
    nprng = np.random.default_rng([seed, len(fleet.name), sum(map(ord, fleet.name))])
    offsets = nprng.uniform(0, fleet.sample_s, len(fleet.nodes))
    acts = [NodeActivity(n.index, steps) for n in fleet.nodes]
    gpus = [GpuState(fleet, n, nprng) for n in fleet.nodes]
    nets = [NetState(fleet, n, nprng) for n in fleet.nodes]
    hosts = [HostState(fleet, n, nprng) for n in fleet.nodes] if fleet.host else []
    miscs = [MiscState(fleet, n, float(offsets[n.index]), nprng) for n in fleet.nodes]
    held: list[tuple[int, str]] = []
    written = 0
    with path.open("w") as handle:
        t0 = 0.0
        while t0 < fleet.duration_s:
            t1 = min(t0 + CHUNK_S, fleet.duration_s)
            out: list[tuple[int, str]] = held
            for n in fleet.nodes:
                off = float(offsets[n.index])
                k0 = max(int(np.ceil((t0 - off) / fleet.sample_s)), 0)
                k1 = max(int(np.ceil((t1 - off) / fleet.sample_s)), 0)
                ts = off + fleet.sample_s * np.arange(k0, k1)
                if len(ts):
                    phase, frac, _ = acts[n.index].at(ts)
                    gpus[n.index].rows(ts, phase, frac, out)
                    nets[n.index].rows(ts, phase, frac, out)
                    if hosts:
                        hosts[n.index].rows(ts, phase, out)
                miscs[n.index].rows(t0, t1, out)
            for s in steps:
                step_rows(fleet, s, t0, t1, nprng, out)
                membership_rows(fleet, s, t0, t1, out)
                crash_rows(fleet, s, t0, t1, out)
            out.sort(key=lambda row: row[0])
            last = t1 >= fleet.duration_s
            cut = fleet.start_ns + round((t1 - HOLD_S) * 1e9)
            ready = out if last else [row for row in out if row[0] < cut]
            held = [] if last else [row for row in out if row[0] >= cut]
            handle.write("\n".join(line for _, line in ready))
            if ready:
                handle.write("\n")
            written += len(ready)
            t0 = t1
    return written
