"""Plain data of one generated fleet: nodes and their parts, jobs, faults, benign conditions."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuModel:
    marketing_name: str  # what NVML reports (gpu_info.name)
    profile: str  # Reflex hardware profile name (the gpu tag "profile")
    sm_clock_max: int
    mem_clock_max: int
    power_limit: float
    slowdown_c: float
    pcie_gen: int
    nvlinks: int
    memory_bytes: int
    idle_clock: int
    idle_power: float


H100 = GpuModel("NVIDIA H100 80GB HBM3", "h100-sxm5-80gb", 1980, 2619, 700.0, 90.0, 5, 18,
                85520809984, 345, 72.0)  # fmt: skip
A100 = GpuModel("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb", 1410, 1593, 400.0, 92.0, 4, 12,
                85899345920, 210, 58.0)  # fmt: skip
H200 = GpuModel("NVIDIA H200", "h200-sxm-141gb", 1980, 3201, 700.0, 90.0, 5, 18,
                150754820096, 345, 80.0)  # fmt: skip


@dataclass
class Port:
    """One HCA port (ib_port) and the netdev the kernel gives it (nic)."""

    hca: str  # mlx5_N
    port: int
    link_layer: str  # InfiniBand or Ethernet (RoCE)
    rate_gbps: float
    role: str  # "rail" (the job's collectives), "storage"
    netdev: str  # ib0 / ens1np0 ...


@dataclass
class NetDev:
    """An Ethernet netdev with no HCA port: management or storage."""

    name: str
    speed_mbps: int
    role: str  # "mgmt", "storage"


@dataclass
class Node:
    name: str
    index: int
    rack: str
    switch: str
    pod: str
    skew_s: float  # the node's clock minus true time
    gpus: int
    model: GpuModel
    ports: list[Port]
    netdevs: list[NetDev]
    bus_ids: list[str]
    gpu_rail: list[int]  # GPU index -> index into ports (rail ports only)
    speed: list[float]  # per-GPU silicon speed factor (binning: a few % apart)
    warm_gpu: int | None = None  # a GPU that always runs ~3 C warmer (benign)
    noisy_port: int | None = None  # a port with steady low symbol errors (benign)
    saturated_port: int | None = None  # a port whose 16-bit symbol_error is stuck at 65535


@dataclass
class Segment:
    """One incarnation of a job on a fixed set of nodes (an elastic restart starts another)."""

    start_s: float
    end_s: float  # when its ranks stop stepping (a crash or the end of the run)
    nodes: list[int]
    first_step: int
    hang_at_s: float | None = None  # steps stop here (a GPU fell off the bus)
    crash_node: int | None = None
    crash_gpu: int | None = None


@dataclass
class Job:
    name: str
    tp: int
    pp: int
    step_s: float
    compute_frac: float  # share of a step spent computing on a healthy rank
    moe: bool = False  # expert parallel: a rotating hot expert per step
    zero: bool = False  # ZeRO/FSDP: all-gather/reduce-scatter every layer
    split: bool = True  # the hook reports compute/comm (else step time only)
    sections: bool = True  # forward/backward/optimizer/data sections
    ckpt_every: int = 200  # steps between checkpoints
    ckpt_s: float = 30.0  # checkpoint write time on a healthy shared FS
    ckpt_marked: bool = True  # the hook marks the checkpoint section
    stage_skew: float = 0.06  # first and last pipeline stages are heavier (embedding, loss)
    tokens_per_step: int = 4 * 1024 * 1024
    segments: list[Segment] = field(default_factory=list)


@dataclass
class Fault:
    """An injected hardware fault and the answer that counts as right."""

    kind: str
    node: int
    component: str  # gpu, nic, host
    index: str  # GPU index, "mlx5_N/port", or "-"
    start_s: float
    end_s: float
    severity: float  # kind-specific strength (slowdown fraction, rate divisor, ...)
    from_job_start: bool = False
    source: str = ""  # the public report the behaviour follows
    episodes: list[tuple[float, float]] = field(default_factory=list)  # flaps: (start, end)


@dataclass
class Benign:
    """A condition that is no hardware fault: an event blaming hardware for it is false."""

    kind: str
    start_s: float
    end_s: float
    nodes: list[int]
    detail: str = ""
    source: str = ""
    factor: float = 1.0  # how much it slows what it slows (comm, checkpoint writes)


@dataclass
class Fleet:
    name: str
    cluster: str
    seed: int
    start_ns: int
    duration_s: float
    sample_s: float
    nodes: list[Node]
    jobs: list[Job]
    faults: list[Fault]
    benign: list[Benign]
    topology: bool  # gpu_topology emitted
    host: bool  # host measurement emitted
    nvlink_every_s: float | None
    spares: list[int]
