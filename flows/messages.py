"""What travels between the steps of the localization flow. All plain, picklable data."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace

import numpy as np

from reflex_localize.flows.state_upgrade import FieldsFilledOnRestore
from reflex_localize.schemas.frame import Frame

CASCADE_KINDS = frozenset({"nccl_timeout", "process_exit"})


def shard_of(node: str, n_shards: int) -> int:
    """Stable node -> shard assignment (crc32, not ``hash``: that is salted per process)."""
    return zlib.crc32(node.encode()) % n_shards


@dataclass(frozen=True)
class ErrorRecord:
    """A rejected record: counted and reported, never silently dropped."""

    where: str
    reason: str
    detail: str = ""


@dataclass
class WindowBatch:
    """One shard's telemetry of one window: what a source partition emits."""

    shard: str
    window: int
    start_ns: int
    end_ns: int
    frames: list[Frame]
    errors: list[ErrorRecord] = field(default_factory=list)
    n_shards: int = 1  # so the job step knows which shards must report for its nodes


@dataclass(frozen=True)
class ExplicitEvent:
    """An event point, classified by the node's hardware profile."""

    time_ns: int
    node: str
    kind: str
    code: int
    component: str
    index: str
    severity: str  # application | warning | critical | cascade | reported (the hook's word)
    meaning: str
    action: str
    job: str = ""
    rank: int = -1

    @property
    def entity(self) -> str:
        return f"{self.node}|{self.component}|{self.index}"

    @property
    def is_cascade(self) -> bool:
        return self.kind in CASCADE_KINDS


@dataclass(frozen=True)
class RankInfo:
    rank: int
    node: str
    gpu: int
    dp_rank: int
    pp_rank: int
    tp_rank: int
    pp_size: int
    profile: str
    gpu_inferred: bool = False  # the hook did not say; placed by rank order (infer_gpus)


def infer_gpus(members: dict[int, RankInfo]) -> dict[int, RankInfo]:
    """Members with every unknown GPU index (-1: the hook did not know it) filled in from the
    rank's place among its node's ranks: launchers (torchrun's LOCAL_RANK, Slurm) hand a
    node's GPUs to its ranks in rank order. Ranks whose GPU is known are left as they are."""
    if all(info.gpu >= 0 for info in members.values()):
        return members
    by_node: dict[str, list[int]] = {}
    for rank in sorted(members):
        by_node.setdefault(members[rank].node, []).append(rank)
    out = dict(members)
    for ranks in by_node.values():
        for place, rank in enumerate(ranks):
            info = members[rank]
            if info.gpu < 0:
                out[rank] = replace(info, gpu=place, gpu_inferred=True)
    return out


@dataclass
class StepRows(FieldsFilledOnRestore):  # a snapshot's pending windows may predate a column
    """Training steps of one job's ranks on one shard in one window, as columns."""

    rank: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    step: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    step_time: np.ndarray = field(default_factory=lambda: np.zeros(0))
    compute: np.ndarray = field(default_factory=lambda: np.zeros(0))
    comm: np.ndarray = field(default_factory=lambda: np.zeros(0))
    time_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # Seconds of the step spent saving a checkpoint, where the hook marks it (else NaN).
    checkpoint: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # The rank's training loss, where the hook reports it (else NaN): SDC's only trace.
    loss: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # The node each row came from ("" where unknown): a rank's steps count only from the
    # node its membership placed it on (flows/judge/rank_placement.py).
    node: np.ndarray = field(default_factory=lambda: np.zeros(0, object))


@dataclass
class JobWindow(FieldsFilledOnRestore):  # a snapshot's pending windows may predate a field
    """A shard's contribution to one job's window: signals, deviations, events, steps."""

    job: str
    shard: str
    window: int
    end_ns: int
    entities: np.ndarray
    values: np.ndarray
    temporal_z: np.ndarray
    scales: np.ndarray
    profiles: np.ndarray
    members: list[RankInfo]
    events: list[ExplicitEvent]
    steps: StepRows
    alive_nodes: list[str]  # nodes that sent anything this window (any family)
    world_size: int
    active: bool = True
    n_shards: int = 1
    # Nodes that sent the agent's telemetry (every window while it runs); None: all alive ones.
    agent_nodes: list[str] | None = None
    # Parts of the job's nodes with a record from earlier (flows/incidents/node_memory.py):
    # entity -> (trouble now, what fed it).
    records: dict[str, tuple[float, str]] = field(default_factory=dict)
    # GPU entity -> the NIC entity of its rail, where the agent wrote gpu_topology.
    rails: dict[str, str] = field(default_factory=dict)
    # Node -> its site tags (rack, switch, a site's own), where the telemetry carried them.
    sites: dict[str, dict[str, str]] = field(default_factory=dict)
    # GPU entity -> (its SM clock in the last job it served, that job): flows/judge/busy_clocks.py.
    past_clocks: dict[str, tuple[float, str]] = field(default_factory=dict)
    # Seconds of the window its GPUs sat idle while its hosts wrote (a checkpoint the hook did
    # not mark, flows/signals/job_pause.py); None: no GPU utilization came from its nodes.
    paused_s: float | None = None
    # Signals the shard saw off their own history on many nodes of several jobs at once this
    # window (flows/judge/site_wide.py): the site's, in this job too.
    site_wide: list[str] = field(default_factory=list)
