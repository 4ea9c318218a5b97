"""Which collectors run where: a cluster may run the training hook without the node agent.

The node agent writes ``gpu``, ``gpu_info``, ``gpu_nvlink``, ``host``, ``nic``, ``ib_port``
and the kernel and NVML events; the training hook writes ``train_step``, ``job_membership``
and the training events (NCCL timeouts, process exits). Where the agent is down, its rows are
simply absent, as they would be in InfluxDB; the hook's rows are kept. The simulation still
draws every value, so a node's telemetry is the same whichever other nodes run the agent.

>>> from reflex_localize.simulator.scenario import load_scenario
>>> from reflex_localize.simulator.cluster import build_cluster
>>> coverage = AgentCoverage(build_cluster(load_scenario("demo")), ("node-0002",))
>>> sorted(coverage.down)
['node-0002']
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator.cluster import ClusterSpec

AGENT_MEASUREMENTS = {
    "gpu",
    "gpu_info",
    "gpu_nvlink",
    "gpu_topology",
    "host",
    "host_disk",
    "nic",
    "ib_port",
}
AGENT_EVENT_SOURCES = {"nvml", "kmsg"}  # "training" events come from the hook


class AgentCoverage:
    """Removes the node agent's rows from the nodes where it is down (``("all",)``: every node)."""

    def __init__(self, cluster: ClusterSpec, agent_down: Sequence[str]) -> None:
        names = [node.name for node in cluster.nodes]
        down = set(names) if tuple(agent_down) == ("all",) else set(agent_down)
        unknown = down - set(names)
        if unknown:
            raise ValueError(f'agent_down: no nodes {sorted(unknown)}; name nodes, or ["all"]')
        self.down = np.array(sorted(down), dtype=object)

    def visible(self, frames: list[Frame]) -> list[Frame]:
        """``frames`` without the rows the agent would have written on the nodes it is down on."""
        if not len(self.down):
            return frames
        return [self._filter(frame) for frame in frames]

    def _filter(self, frame: Frame) -> Frame:
        if frame.measurement == "event":
            agent = np.isin(frame.tags["source"], list(AGENT_EVENT_SOURCES))
        else:
            agent = np.full(len(frame), frame.measurement in AGENT_MEASUREMENTS)
        drop = agent & np.isin(frame.tags["node"], self.down)
        return frame.take(~drop) if np.any(drop) else frame
