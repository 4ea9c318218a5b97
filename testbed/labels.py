"""The labels file of one run: what was injected, where, when, and what answer counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testbed import lp
from testbed.model import Fleet

GRACE_BEFORE_S = 60.0
GRACE_AFTER_S = 600.0


def right_parts(fleet: Fleet, node: int, component: str, index: str) -> list[dict[str, str]]:
    """The (component, index) answers that name the faulty part: a host fault is the host or
    the node; a port is its HCA port or the netdev the kernel gives it (mlx5_2/1 = ib2)."""
    if component == "host":
        return [{"component": "host", "index": "*"}, {"component": "node", "index": "*"}]
    if component == "nic":
        port = next(p for p in fleet.nodes[node].ports if f"{p.hca}/{p.port}" == index)
        return [{"component": "nic", "index": index}, {"component": "nic", "index": port.hca},
                {"component": "nic", "index": port.netdev}]  # fmt: skip
    return [{"component": component, "index": index}]


def labels(fleet: Fleet) -> dict[str, Any]:
    hours = fleet.duration_s / 3600.0
    faulty_s = sum(
        min(f.end_s + GRACE_AFTER_S, fleet.duration_s) - max(f.start_s - GRACE_BEFORE_S, 0)
        for f in fleet.faults
    )
    return {
        "fleet": fleet.name,
        "cluster": fleet.cluster,
        "seed": fleet.seed,
        "start_ns": fleet.start_ns,
        "duration_s": fleet.duration_s,
        "sample_s": fleet.sample_s,
        "nodes": [n.name for n in fleet.nodes],
        "sites": {n.name: lp.site(fleet, n) for n in fleet.nodes},
        "node_hours": len(fleet.nodes) * hours,
        "benign_node_hours": len(fleet.nodes) * hours - faulty_s / 3600.0,
        "grace_s": {"before": GRACE_BEFORE_S, "after": GRACE_AFTER_S},
        "telemetry": {
            "gpu_topology": fleet.topology,
            "host": fleet.host,
            "nvlink_every_s": fleet.nvlink_every_s,
        },
        "jobs": [
            {
                "name": j.name,
                "tp": j.tp,
                "pp": j.pp,
                "moe": j.moe,
                "zero": j.zero,
                "step_s": j.step_s,
                "compute_comm_split": j.split,
                "segments": [
                    {
                        "start_s": s.start_s,
                        "end_s": s.end_s,
                        "first_step": s.first_step,
                        "nodes": [fleet.nodes[n].name for n in s.nodes],
                        "hang_at_s": s.hang_at_s,
                    }
                    for s in j.segments
                ],
            }
            for j in fleet.jobs
        ],
        "faults": [
            {
                "kind": f.kind,
                "node": fleet.nodes[f.node].name,
                "component": f.component,
                "index": f.index,
                "start_s": f.start_s,
                "end_s": f.end_s,
                "start_ns": fleet.start_ns + round(f.start_s * 1e9),
                "end_ns": fleet.start_ns + round(f.end_s * 1e9),
                "severity": round(f.severity, 3),
                "from_job_start": f.from_job_start,
                "source": f.source,
                "right": {
                    "node": fleet.nodes[f.node].name,
                    "parts": right_parts(fleet, f.node, f.component, f.index),
                },
            }
            for f in fleet.faults
        ],
        "benign": [
            {
                "kind": b.kind,
                "start_s": b.start_s,
                "end_s": b.end_s,
                "start_ns": fleet.start_ns + round(b.start_s * 1e9),
                "end_ns": fleet.start_ns + round(b.end_s * 1e9),
                "nodes": [fleet.nodes[n].name for n in b.nodes],
                "detail": b.detail,
                "source": b.source,
                "hardware_fault": False,
            }
            for b in fleet.benign
        ],
    }


def write(fleet: Fleet, path: Path) -> dict[str, Any]:
    data = labels(fleet)
    path.write_text(json.dumps(data, indent=1))
    return data
