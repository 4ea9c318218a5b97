"""The GPU <-> HCA map of an HGX node, as the agent writes it (``gpu_topology``).

On an 8-GPU HGX baseboard (DGX H100, HGX A100) every GPU shares a PCIe switch with one
ConnectX HCA: the GPU's *rail*. NCCL sends a GPU's inter-node traffic through the HCA nearest
to it (``nvidia-smi topo -m`` shows the pair as ``PIX``), so a slow rail slows that GPU's
rank. The simulated cluster has one HCA per GPU, ``mlx5_<gpu>`` port 1 (``cluster.py``), so
the map is the identity on indexes (a real DGX H100 names them otherwise: GPU 1's is mlx5_3);
what it adds is the join: GPU index, PCI bus id (as NVML writes it, and as the kernel log
shortens it) and HCA port. GPUs 0-3 hang off the first CPU
socket and 4-7 off the second, hence their NUMA nodes.

The agent reads it at start and then rarely (PCIe affinity does not change while a node is
up), so it is emitted at the first second and every ``TOPOLOGY_EVERY_S`` after.

>>> from reflex_localize.simulator.scenario import load_scenario
>>> from reflex_localize.simulator.cluster import build_cluster
>>> topology = GpuTopology(build_cluster(load_scenario("demo")))
>>> frame = topology.frame(0)
>>> len(frame), frame.fields["hca"][3], frame.fields["pci_bus_id"][3], frame.fields["path"][3]
(256, 'mlx5_3', '00000000:5D:00.0', 'PIX')
>>> kernel_bus_id(2)
'0000:3a:00'
"""

from __future__ import annotations

import numpy as np

from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator.cluster import ClusterSpec

TOPOLOGY_EVERY_S = 600
# The bus numbers of the eight GPUs of an HGX H100 baseboard, in NVML index order.
HGX_GPU_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
HCA_PORT = 1
GPU_HCA_PATH = "PIX"  # GPU and HCA under one PCIe switch


def pci_bus_id(gpu: int) -> str:
    """The GPU's bus id as NVML gives it (``nvmlDeviceGetPciInfo().busId``)."""
    return f"00000000:{HGX_GPU_BUSES[gpu % 8]:02X}:00.0"


def kernel_bus_id(gpu: int) -> str:
    """The same GPU as the driver's kernel log names it: ``NVRM: Xid (PCI:0000:18:00): 79``
    has a 4-digit domain, lower-case hex and no function number (``collectors/kmsg.py``)."""
    return f"0000:{HGX_GPU_BUSES[gpu % 8]:02x}:00"


def numa_node(gpu: int, gpus_per_node: int) -> int:
    return 0 if gpu < gpus_per_node // 2 else 1


class GpuTopology:
    """One ``gpu_topology`` row per GPU of the cluster: its rail's HCA and port."""

    def __init__(self, cluster: ClusterSpec) -> None:
        gpus = cluster.gpus_per_node
        local = np.tile(np.arange(gpus), len(cluster.nodes))
        node = np.repeat(np.arange(len(cluster.nodes)), gpus)
        self.tags = {
            "cluster": _column([cluster.name] * len(local)),
            "node": _column([cluster.nodes[n].name for n in node]),
            "gpu": _column([str(g) for g in local]),
        }
        self.fields = {
            "hca": _column([cluster.nodes[n].hcas[g] for n, g in zip(node, local, strict=True)]),
            "hca_port": np.full(len(local), HCA_PORT, np.int64),
            "pci_bus_id": _column([pci_bus_id(int(g)) for g in local]),
            "path": _column([GPU_HCA_PATH] * len(local)),
            "numa_node": np.array([numa_node(int(g), gpus) for g in local], np.int64),
        }

    def frame(self, time_ns: int) -> Frame:
        rows = len(self.fields["hca"])
        return Frame(
            "gpu_topology", np.full(rows, time_ns, np.int64), dict(self.tags), dict(self.fields)
        )

    def due(self, first_s: int, seconds: int) -> int | None:
        """The second of the block [first_s, first_s + seconds) at which the agent reads the
        map again, or None."""
        seconds_in = first_s + np.arange(seconds)
        hits = np.flatnonzero(seconds_in % TOPOLOGY_EVERY_S == 0)
        return int(seconds_in[hits[0]]) if len(hits) else None


def _column(values: list[str]) -> np.ndarray:
    return np.array(values, dtype=object)
