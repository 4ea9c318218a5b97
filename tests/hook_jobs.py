"""Telemetry of training jobs as a deployment writes it with only the training hook: a
``train_step`` point per rank and step, ``job_membership`` at the start and every minute, with
the fields a real hook may leave out left out. No agent telemetry unless asked for."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from reflex_localize.flows.io.sources import MemorySource, split_windows
from reflex_localize.schemas.codec import FieldValue, Point
from reflex_localize.schemas.frame import Frame, frames_from_points

START_NS = 1_767_225_600_000_000_000
WINDOW_S = 10.0
Compute = Callable[[int, int], float]  # (rank, step) -> compute seconds


@dataclass
class HookJob:
    """``ranks_per_node`` ranks on each node; ranks fill pipeline stages in order (Megatron:
    rank = dp * pp + pp_rank when ``pp_size`` > 1)."""

    nodes: int = 4
    ranks_per_node: int = 2
    pp_size: int = 1
    step_s: float = 47.0
    steps: int = 12
    compute: Compute = lambda rank, step: 20.0
    job: str = "llm"
    cluster: str = "c1"
    omit: tuple[str, ...] = ("profile", "gpu")  # membership fields the hook does not know
    silent_nodes: set[str] = field(default_factory=set)  # nodes whose hook sends nothing
    declared_world_size: int | None = None  # what membership says, when it is wrong
    first_node: int = 0  # node-NN of the job's first rank

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    def node_of(self, rank: int) -> str:
        return f"node-{self.first_node + rank // self.ranks_per_node:02d}"

    def stage_of(self, rank: int) -> int:
        return rank % self.pp_size

    def points(self) -> list[Point]:
        out: list[Point] = []
        duration_ns = int(self.steps * self.step_s * 1e9)
        for rank in range(self.world_size):
            node = self.node_of(rank)
            if node in self.silent_nodes:
                continue
            tags = {"cluster": self.cluster, "job": self.job, "node": node, "rank": str(rank)}
            for at in range(0, duration_ns + 1, 60 * 10**9):
                out.append(Point("job_membership", tags, self._membership(rank), START_NS + at))
            for step in range(self.steps):
                compute = self.compute(rank, step)
                fields = {
                    "step": step,
                    "step_time_seconds": self.step_s,
                    "compute_seconds": compute,
                    "comm_seconds": max(self.step_s - compute, 0.0),
                }
                end_ns = START_NS + int((step + 1) * self.step_s * 1e9) + rank * 1000
                out.append(Point("train_step", tags, fields, end_ns))
        return out

    def _membership(self, rank: int) -> dict[str, FieldValue]:
        fields: dict[str, FieldValue] = {
            "world_size": self.declared_world_size or self.world_size,
            "active": True,
            "dp_rank": rank // self.pp_size,
            "pp_rank": self.stage_of(rank),
            "tp_rank": 0,
            "pp_size": self.pp_size,
            "gpu": rank % self.ranks_per_node,
            "profile": "h100-sxm5-80gb",
        }
        return {k: v for k, v in fields.items() if k not in self.omit}


def source_of(points: list[Point], extra: list[Frame] | None = None) -> MemorySource:
    frames = [*frames_from_points(points), *(extra or [])]
    ordered = sorted(split_windows(frames, int(WINDOW_S * 1e9)), key=lambda w: w[0])
    return MemorySource([(w, f) for w, f, _ in ordered], WINDOW_S)


def xid(node: str, gpu: int, code: int, time_ns: int, cluster: str = "c1") -> Point:
    """An XID as the agent's kernel-log collector writes it."""
    tags = {"cluster": cluster, "node": node, "source": "kmsg", "kind": "xid"}
    return Point("event", tags, {"code": code, "gpu": gpu, "message": f"Xid {code}"}, time_ns)
