"""A mixture of faults drawn from published failure statistics (shared/notes/libraries.md).

Interruptions follow the Llama 3 405B breakdown (419 interruptions on 16,384 H100s): faulty
GPU 30.1 %, HBM3 17.2 %, software 12.9 %, network switch/cable 8.4 %, host maintenance
7.6 %, GPU SRAM 4.5 %, GSP 4.1 %, NIC 1.7 %, NCCL watchdog 1.7 %, silent data corruption
1.4 %, thermal interface 1.4 %. Slowdowns (which interrupt nothing) are drawn apart: per the
Alibaba fail-slow study communication ones outnumber compute ones, and per ByteDance many
stragglers are not hardware at all (pipeline and sequence-length imbalance).

Each fault lands on its own job, after a warm-up, on a random node, GPU and port.

>>> from reflex_localize.simulator.scenario import load_scenario
>>> from reflex_localize.simulator.cluster import build_cluster
>>> scenario = load_scenario("mixture")
>>> faults = mixture_faults(scenario, build_cluster(scenario), np.random.default_rng(3))
>>> len(faults) == scenario.mixture_faults, all(f.onset_s >= WARMUP_S for f in faults)
(True, True)
"""

from __future__ import annotations

import numpy as np

from reflex_localize.simulator.cluster import ClusterSpec
from reflex_localize.simulator.scenario import FaultConfig, Scenario

WARMUP_S = 240.0
SLOWDOWN_SHARE = 0.35  # of drawn faults, the share that are slowdowns, not interruptions

# Llama 3 root-cause category -> (share %, fault types that realise it, split evenly).
INTERRUPTIONS: dict[str, tuple[float, tuple[str, ...]]] = {
    "faulty_gpu": (30.1, ("xid79", "xid74", "fail_slow_gpu")),
    "hbm3": (17.2, ("xid48", "xid94", "row_remap_exhaustion")),
    "software": (12.9, ("software_crash",)),
    "network_switch_cable": (8.4, ("ib_link_down", "ib_flapping")),
    "host_maintenance": (7.6, ("host_contention", "io_stall")),
    "gpu_sram": (4.5, ("xid95",)),
    "gsp": (4.1, ("xid119",)),
    "nic": (1.7, ("pfc_storm", "ib_link_down")),
    "nccl_watchdog": (1.7, ("nccl_hang",)),
    "sdc": (1.4, ("sdc",)),
    "thermal_interface": (1.4, ("thermal_throttle",)),
}
SLOWDOWNS: dict[str, float] = {
    "ib_flapping": 3.0,
    "nvlink_degradation": 2.0,
    "pcie_downgrade": 1.0,
    "pfc_storm": 1.0,
    "fail_slow_gpu": 1.0,
    "thermal_throttle": 0.5,
    "power_brake": 0.5,
    "compound_benign": 2.0,
    "pipeline_imbalance": 2.0,
    "seqlen_imbalance": 1.5,
}


def fault_weights() -> dict[str, float]:
    """Probability of each fault type in the mixture."""
    weights: dict[str, float] = {}
    total = sum(share for share, _ in INTERRUPTIONS.values())
    for share, types in INTERRUPTIONS.values():
        for kind in types:
            weights[kind] = weights.get(kind, 0) + (1 - SLOWDOWN_SHARE) * share / total / len(types)
    slow_total = sum(SLOWDOWNS.values())
    for kind, weight in SLOWDOWNS.items():
        weights[kind] = weights.get(kind, 0) + SLOWDOWN_SHARE * weight / slow_total
    return weights


def mixture_faults(
    scenario: Scenario, cluster: ClusterSpec, rng: np.random.Generator
) -> list[FaultConfig]:
    if scenario.mixture_faults <= 0:
        return []
    weights = fault_weights()
    kinds, probabilities = list(weights), np.array(list(weights.values()))
    jobs = list(rng.permutation(len(cluster.jobs)))[: scenario.mixture_faults]
    latest = max(WARMUP_S + 1, scenario.duration_s - 150.0)
    faults = []
    for job_index in jobs:
        job = cluster.jobs[job_index]
        kind = str(rng.choice(kinds, p=probabilities / probabilities.sum()))
        node = int(rng.integers(len(job.nodes)))
        if (
            kind == "pfc_storm"
            and cluster.nodes[cluster.node_index(job.nodes[node])].link_layer != "Ethernet"
        ):
            kind = "ib_flapping"  # PFC exists only on RoCE; the IB analogue is a flapping port
        faults.append(
            FaultConfig(
                type=kind,
                onset_s=float(np.floor(rng.uniform(WARMUP_S, latest))),
                job=job.name,
                job_node=node,
                gpu=int(rng.integers(cluster.gpus_per_node)),
                port=int(rng.integers(cluster.gpus_per_node)),
            )
        )
    return faults
