"""One entity per GPU, whichever source names it.

NVML indexes a GPU by its index on the node; the kernel log names it by PCI bus id
(``NVRM: Xid (PCI:0000:3b:00): 79``), in a shorter spelling than NVML's
``00000000:3B:00.0``. The agent writes each GPU's bus id in ``gpu_info`` and ``gpu_topology``;
this map turns a bus id back into the index, so an XID seen by both sources lands on one GPU.

>>> bus_key("00000000:3B:00.0") == bus_key("0000:3b:00") == "0:3b:00"
True
>>> ids = GpuIdentity()
>>> ids.bus[("n1", "0:3b:00")] = 2
>>> ids.index("n1", "0000:3b:00"), ids.index("n1", "mlx5_0")
('2', None)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from reflex_localize.flows.state_upgrade import FieldsFilledOnRestore
from reflex_localize.schemas.frame import Frame

# domain:bus:device[.function], hex; the domain may be 4 or 8 digits, the function absent.
_BUS = re.compile(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.[0-7])?$")
_SOURCES = ("gpu_info", "gpu_topology")


def bus_key(text: str) -> str | None:
    """A spelling-independent key of a PCI address; None when the text is not one."""
    match = _BUS.match(text.strip())
    if match is None:
        return None
    domain, bus, device = match.groups()
    return f"{int(domain or '0', 16):x}:{int(bus, 16):02x}:{int(device, 16):02x}"


@dataclass
class GpuIdentity(FieldsFilledOnRestore):
    """(node, bus key) -> GPU index, learned from the agent's identity measurements."""

    bus: dict[tuple[str, str], int] = field(default_factory=dict)
    # (node, GPU index) -> the NIC entity index of its rail ("mlx5_3/1"), from gpu_topology.
    rail: dict[tuple[str, int], str] = field(default_factory=dict)
    # node -> GPU UUID -> index, from gpu_info: a job's visible devices may name GPUs by UUID.
    uuids: dict[str, dict[str, int]] = field(default_factory=dict)

    def learn(self, frames: list[Frame]) -> None:
        for frame in frames:
            if frame.measurement == "gpu_info" and "uuid" in frame.fields:
                self._learn_uuids(frame)
            if frame.measurement not in _SOURCES or "pci_bus_id" not in frame.fields:
                continue
            nodes, gpus = frame.tags["node"].tolist(), frame.tags["gpu"].tolist()
            ids = np.asarray(frame.fields["pci_bus_id"]).tolist()
            for node, gpu, bus_id in zip(nodes, gpus, ids, strict=True):
                key = bus_key(str(bus_id))
                if key is not None and str(gpu).isdigit():
                    self.bus[(str(node), key)] = int(gpu)
            if frame.measurement == "gpu_topology" and "hca" in frame.fields:
                self._learn_rails(frame)

    def learn_tagged_uuids(self, frames: list[Frame], nodes: set[str]) -> None:
        """UUIDs from the GPU telemetry of a cluster without the agent's gpu_info: dcgm-exporter
        labels every series ``UUID`` and Telegraf's nvidia_smi tags it ``uuid``, both carried
        onto Reflex's gpu points. Read only for ``nodes`` (those with a rank still to place):
        the tag is on every sample, and most windows need none of it."""
        for frame in frames:
            tag = next((t for t in ("UUID", "uuid") if t in frame.tags), None)
            if frame.measurement != "gpu" or tag is None or "gpu" not in frame.tags:
                continue
            wanted = np.isin(frame.tags["node"], list(nodes))
            rows = zip(frame.tags["node"][wanted].tolist(), frame.tags["gpu"][wanted].tolist(),
                       frame.tags[tag][wanted].tolist(), strict=True)  # fmt: skip
            for node, gpu, uuid in dict.fromkeys(rows):
                if str(gpu).isdigit() and uuid:
                    self.uuids.setdefault(str(node), {})[str(uuid)] = int(gpu)

    def _learn_uuids(self, frame: Frame) -> None:
        nodes, gpus = frame.tags["node"].tolist(), frame.tags["gpu"].tolist()
        for node, gpu, uuid in zip(nodes, gpus, np.asarray(frame.fields["uuid"]).tolist(),
                                   strict=True):  # fmt: skip
            if str(gpu).isdigit() and uuid:
                self.uuids.setdefault(str(node), {})[str(uuid)] = int(gpu)

    def _learn_rails(self, frame: Frame) -> None:
        ports = frame.fields.get("hca_port", np.ones(len(frame), dtype=np.int64))
        for node, gpu, hca, port in zip(
            frame.tags["node"].tolist(),
            frame.tags["gpu"].tolist(),
            np.asarray(frame.fields["hca"]).tolist(),
            np.asarray(ports).tolist(),
            strict=True,
        ):
            if str(gpu).isdigit() and hca:
                self.rail[(str(node), int(gpu))] = f"{hca}/{int(port)}"

    def rails_of(self, nodes: set[str]) -> dict[str, str]:
        """GPU entity -> the NIC entity of its rail, for these nodes."""
        return {
            f"{node}|gpu|{gpu}": f"{node}|nic|{port}"
            for (node, gpu), port in self.rail.items()
            if node in nodes
        }

    def index(self, node: str, device: str) -> str | None:
        """The GPU index of a device named by bus id, when the node told which it is."""
        key = bus_key(device)
        gpu = self.bus.get((node, key)) if key is not None else None
        return None if gpu is None else str(gpu)
