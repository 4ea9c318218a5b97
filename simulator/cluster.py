"""The simulated cluster: nodes, their GPUs and HCAs, and the jobs placed on them.

Every GPU has a global index ``node * gpus_per_node + gpu``; its HCA port (one HCA per
GPU, ``mlx5_<gpu>`` port 1) shares that index. Per-entity arrays built once here let the
telemetry code index whole columns instead of looping over GPUs.

>>> from reflex_localize.simulator.scenario import load_scenario
>>> cluster = build_cluster(load_scenario("demo"))
>>> cluster.nodes[0].name, cluster.nodes[0].hcas[0], cluster.jobs[0].dp
('node-0001', 'mlx5_0', 4)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from reflex_localize.schemas.hardware_profiles import HardwareProfile, load_profiles
from reflex_localize.simulator.scenario import JobConfig, Scenario

# Link rate of the HCA that ships with each GPU generation's reference systems.
IB_RATE_GBPS = {"volta": 100.0, "ampere": 200.0, "hopper": 400.0}


@dataclass(frozen=True)
class NodeSpec:
    name: str
    profile: str
    gpus: int
    hcas: tuple[str, ...]
    link_layer: str  # "InfiniBand" or "Ethernet" (RoCE)


@dataclass(frozen=True)
class JobSpec:
    """A job and its rank layout: rank = pp_rank * (dp * tp) + dp_rank * tp + tp_rank
    (tensor parallel innermost, pipeline outermost, as Megatron orders them)."""

    name: str
    nodes: tuple[str, ...]
    dp: int
    pp: int
    tp: int
    start_s: float
    end_s: float
    config: JobConfig = field(repr=False)
    rank_node: np.ndarray = field(repr=False)  # global node index per rank
    rank_gpu: np.ndarray = field(repr=False)  # global GPU index per rank

    @property
    def world_size(self) -> int:
        return self.dp * self.pp * self.tp

    @property
    def pp_rank(self) -> np.ndarray:
        return np.arange(self.world_size) // (self.dp * self.tp)

    @property
    def dp_rank(self) -> np.ndarray:
        return (np.arange(self.world_size) // self.tp) % self.dp

    @property
    def tp_rank(self) -> np.ndarray:
        return np.arange(self.world_size) % self.tp


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    nodes: list[NodeSpec]
    jobs: list[JobSpec]
    gpus_per_node: int

    @property
    def gpu_count(self) -> int:
        return len(self.nodes) * self.gpus_per_node

    def node_index(self, name: str) -> int:
        return int(name.split("-")[-1]) - 1

    def job_of_node(self, node: int) -> JobSpec | None:
        for job in self.jobs:
            if node in job.rank_node:
                return job
        return None

    def profiles(self) -> list[HardwareProfile]:
        """The hardware profile of each node."""
        table = load_profiles()
        return [table[node.profile] for node in self.nodes]


def node_name(index: int) -> str:
    return f"node-{index + 1:04d}"


def build_cluster(scenario: Scenario) -> ClusterSpec:
    gpus = scenario.gpus_per_node
    profile_of = [name for name, count in scenario.profiles.items() for _ in range(count)]
    first_roce = scenario.nodes - scenario.roce_nodes
    nodes = [
        NodeSpec(
            node_name(i),
            profile_of[i],
            gpus,
            tuple(f"mlx5_{g}" for g in range(gpus)),
            "Ethernet" if i >= first_roce else "InfiniBand",
        )
        for i in range(scenario.nodes)
    ]
    placed = {int(n.split("-")[-1]) - 1 for c in scenario.jobs for n in c.nodes_list}
    free = [i for i in range(scenario.nodes) if i not in placed]
    jobs: list[JobSpec] = []
    for config in scenario.jobs:
        if config.nodes_list:
            taken = [int(name.split("-")[-1]) - 1 for name in config.nodes_list]
        else:
            pool = [i for i in free if config.profile in (None, profile_of[i])]
            if len(pool) < config.nodes:
                raise ValueError(f"job {config.name}: needs {config.nodes} nodes, {len(pool)} free")
            taken = pool[: config.nodes]
            free = [i for i in free if i not in set(taken)]
        job = _job(config, taken, gpus, scenario.duration_s)
        _check_no_overlap(job, jobs)
        jobs.append(job)
    return ClusterSpec(scenario.cluster_name, nodes, jobs, gpus)


def _check_no_overlap(job: JobSpec, earlier: list[JobSpec]) -> None:
    """A node serves one job at a time: jobs placed by name may share a node only in turn."""
    for other in earlier:
        shared = sorted(set(job.nodes) & set(other.nodes))
        if shared and job.start_s < other.end_s and other.start_s < job.end_s:
            raise ValueError(f"jobs {other.name} and {job.name} overlap in time on {shared[0]}")


def _job(config: JobConfig, node_indices: list[int], gpus: int, duration_s: float) -> JobSpec:
    world = len(node_indices) * gpus
    dp = world // (config.pp * config.tp)
    # Ranks fill nodes in order, so a tensor-parallel group of 8 shares one node's NVLink.
    rank_gpu = np.concatenate([np.arange(n * gpus, (n + 1) * gpus) for n in node_indices])
    return JobSpec(
        name=config.name,
        nodes=tuple(node_name(i) for i in node_indices),
        dp=dp,
        pp=config.pp,
        tp=config.tp,
        start_s=config.start_s,
        end_s=duration_s if config.end_s is None else min(config.end_s, duration_s),
        config=config,
        rank_node=rank_gpu // gpus,
        rank_gpu=rank_gpu,
    )
