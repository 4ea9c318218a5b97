"""Three fleets, each from a different kind of site, built for a seed and a duration."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from testbed import naming, sources
from testbed.faults import plan_benign, plan_faults
from testbed.model import A100, H100, H200, Fleet, GpuModel, Job, NetDev, Node, Port, Segment

START = int(datetime(2026, 10, 6, 6, 0, tzinfo=UTC).timestamp()) * 10**9


@dataclass(frozen=True)
class FleetSpec:
    name: str
    cluster: str
    nodes: int
    hours: float
    sample_s: float
    model: GpuModel
    names: Callable[[int, random.Random], list[tuple[str, str, str, str]]]
    ports: Callable[[], tuple[list[Port], list[NetDev], list[int]]]
    topology: bool
    host: bool
    nvlink_every_s: float | None
    jobs: Callable[[int, random.Random], tuple[list[Job], list[list[int]], list[int]]]
    fault_kinds: tuple[str, ...]
    faults: int
    note: str


def _ndr_ports() -> tuple[list[Port], list[NetDev], list[int]]:
    rails = [Port(f"mlx5_{i}", 1, "InfiniBand", 400.0, "rail", f"ib{i}") for i in range(8)]
    storage = Port("mlx5_8", 1, "Ethernet", 200.0, "storage", "ens9f0np0")
    return [*rails, storage], [NetDev("eno1", 25000, "mgmt")], list(range(8))


def _hdr_ports() -> tuple[list[Port], list[NetDev], list[int]]:
    rails = [Port(f"mlx5_{i}", 1, "InfiniBand", 200.0, "rail", f"ib{i}") for i in range(4)]
    storage = Port("mlx5_4", 1, "Ethernet", 100.0, "storage", "ens6f0np0")
    mgmt = [NetDev("eno1", 25000, "mgmt"), NetDev("eno2", 25000, "unplugged")]
    return [*rails, storage], mgmt, [0, 0, 1, 1, 2, 2, 3, 3]


def _roce_ports() -> tuple[list[Port], list[NetDev], list[int]]:
    rails = [Port(f"mlx5_{i}", 1, "Ethernet", 400.0, "rail", f"ens{i + 1}np0") for i in range(8)]
    return rails, [NetDev("enp3s0f0", 100000, "mgmt")], list(range(8))


def _jobs_hgx(n: int, rng: random.Random) -> tuple[list[Job], list[list[int]], list[int]]:
    order = list(range(n))
    dense = Job(f"slurm-{rng.randrange(880000, 890000)}", tp=8, pp=4, step_s=9.0,
                compute_frac=0.74, ckpt_every=150, ckpt_s=40.0)  # fmt: skip
    moe = Job(f"slurm-{rng.randrange(890000, 899000)}", tp=4, pp=1, step_s=4.5, compute_frac=0.62,
              moe=True, ckpt_every=300, ckpt_s=30.0, ckpt_marked=False)  # fmt: skip
    sft = Job(f"slurm-{rng.randrange(900000, 910000)}", tp=1, pp=1, step_s=3.2, compute_frac=0.7,
              zero=True, ckpt_every=600, ckpt_s=20.0)  # fmt: skip
    return [dense, moe, sft], [order[:32], order[32:48], order[48:56]], order[56:62]


def _jobs_aisle(n: int, rng: random.Random) -> tuple[list[Job], list[list[int]], list[int]]:
    order = list(range(n))
    rng.shuffle(order)  # the scheduler hands out nodes in no rack order
    fsdp = Job(f"{rng.randrange(41000000, 42000000)}", tp=1, pp=1, step_s=30.0, compute_frac=0.8,
               zero=True, split=False, sections=False, ckpt_every=40, ckpt_s=90.0,
               ckpt_marked=False, tokens_per_step=16 * 1024 * 1024)  # fmt: skip
    pipe = Job(f"{rng.randrange(42000000, 43000000)}", tp=2, pp=32, step_s=12.0,
               compute_frac=0.66, ckpt_every=100, ckpt_s=35.0, stage_skew=0.08)  # fmt: skip
    return [fsdp, pipe], [order[:32], order[32:40]], order[40:46]


def _jobs_site(n: int, rng: random.Random) -> tuple[list[Job], list[list[int]], list[int]]:
    order = list(range(n))
    dense = Job(f"train-{rng.randrange(1000, 9999)}-tp4", tp=4, pp=1, step_s=2.5,
                compute_frac=0.7, ckpt_every=500, ckpt_s=25.0)  # fmt: skip
    return [dense], [order[:28]], order[28:32]


SPECS = {
    "hgx_ndr": FleetSpec(
        "hgx_ndr",
        "dc2-hgx",
        64,
        3.0,
        5.0,
        H100,
        naming.hgx_names,
        _ndr_ports,
        True,
        True,
        120.0,
        _jobs_hgx,
        (
            "gpu_fail_slow",
            "thermal_throttle",
            "ib_link_flap",
            "ib_degraded_speed",
            "pcie_downtrain",
            "host_cpu_contention",
            "hbm_uncorrectable",
        ),
        4,
        "H100 + 8x NDR 400 IB rails + RoCE storage port + 25 GbE mgmt; 5 s sampling; "
        "Megatron TP8/PP4, MoE EP, ZeRO; XID 79 then an elastic restart onto a spare",
    ),
    "aisle_hdr": FleetSpec(
        "aisle_hdr",
        "aisle-a100",
        48,
        3.0,
        5.0,
        A100,
        naming.aisle_names,
        _hdr_ports,
        False,
        True,
        None,
        _jobs_aisle,
        (
            "gpu_fail_slow",
            "thermal_throttle",
            "ib_degraded_speed",
            "ib_link_flap",
            "host_cpu_contention",
            "host_memory_pressure",
        ),
        3,
        "A100 + 4x HDR 200 IB rails (2 GPUs a rail) + 100 GbE storage + 2 mgmt ports (one "
        "unplugged); 5 s sampling; no gpu_topology; FSDP 30 s steps without compute/comm split; "
        "pipeline TP2 x PP32 (two ranks a stage)",
    ),
    "site_roce": FleetSpec(
        "site_roce",
        "sjc1-h200",
        32,
        1.0,
        1.0,
        H200,
        naming.site_names,
        _roce_ports,
        True,
        False,
        None,
        _jobs_site,
        (
            "gpu_fail_slow",
            "thermal_throttle",
            "ib_degraded_speed",
            "pcie_downtrain",
            "ib_link_flap",
        ),
        4,
        "H200 + 8x 400 GbE RoCE rails + 100 GbE mgmt; 1 s sampling; no host measurement; "
        "TP4 dense with 2.5 s steps; one fault present from the job's first step",
    ),
}


def build_fleet(spec: FleetSpec, seed: int, hours: float | None = None,
                nodes: int | None = None) -> Fleet:  # fmt: skip
    rng = random.Random(f"{spec.name}:{seed}")
    count = nodes or spec.nodes
    duration = (hours or spec.hours) * 3600.0
    names = spec.names(count, rng)
    fleet_nodes = []
    for i, (name, rack, switch, pod) in enumerate(names):
        ports, netdevs, rail = spec.ports()
        skew = rng.choice([0.0] * 6 + [1.3, -1.7, 2.0, -0.9]) + rng.uniform(-0.05, 0.05)
        buses = [f"0000:{b:02x}:00.0" for b in (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)]
        speed = [rng.gauss(1.0, 0.015) for _ in range(8)]
        fleet_nodes.append(Node(name, i, rack, switch, pod, skew, 8, spec.model, ports, netdevs,
                                buses, rail, speed))  # fmt: skip
    jobs, placements, spares = spec.jobs(count, rng)
    if nodes is not None:  # a small fleet (tests, --quick): shrink the jobs to fit
        jobs, placements, spares = _shrink(jobs, placements, spares, count)
    for job, placed in zip(jobs, placements, strict=True):
        start = rng.uniform(30.0, 90.0)
        job.segments.append(Segment(start, duration, list(placed), 1))
    fleet = Fleet(spec.name, spec.cluster, seed, START + seed * 86400 * 10**9, duration,
                  spec.sample_s, fleet_nodes, jobs, [], [], spec.topology, spec.host,
                  spec.nvlink_every_s, list(spares))  # fmt: skip
    quirky = rng.sample([i for p in placements for i in p], 2)
    fleet_nodes[quirky[0]].warm_gpu = rng.randrange(8)
    fleet_nodes[quirky[1]].noisy_port = rng.randrange(max(fleet_nodes[quirky[1]].gpu_rail) + 1)
    if spec.name == "aisle_hdr":
        fleet_nodes[rng.randrange(count)].saturated_port = 1
    plan_faults(fleet, spec.fault_kinds, spec.faults, rng)
    plan_benign(fleet, rng)
    _ = sources  # the citations live in faults.py and the labels
    return fleet


def _shrink(
    jobs: list[Job], placements: list[list[int]], spares: list[int], count: int
) -> tuple[list[Job], list[list[int]], list[int]]:
    """Keeps the first job on all but two nodes (one spare, one idle): enough for --quick."""
    job = jobs[0]
    per_node = 8
    usable = count - 2
    unit = job.tp * job.pp
    ranks = max(unit, (usable * per_node) // unit * unit)
    used = ranks // per_node
    return [job], [list(range(used))], [count - 2]
