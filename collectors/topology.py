"""Which InfiniBand/RoCE HCA port serves each GPU: PCIe affinity from sysfs, as ``nvidia-smi
topo -m`` shows it.

Sources (relative to ``sys_root``, ``/sys`` on a node):

- ``bus/pci/devices/ID``: a link to the device's place in the PCIe tree, whose real path
  (``devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0``) names the host
  bridge first, then every bridge down to the device; ``numa_node`` inside (-1: unknown);
- ``class/infiniband/HCA/device``: the same link for each HCA, and ``ports/N/state``;
- each GPU's bus id from NVML (``nvmlDeviceGetPciInfo().busId``, through :class:`Nvml`).

The relation of a GPU and an HCA, from their lowest common ancestor, with the names and
meanings of the ``nvidia-smi topo -m`` legend (nearest first):

- ``PIX``: under one PCIe switch. In sysfs a switch is its upstream port, then one downstream
  port per device, so both devices sit at most two levels below the common ancestor;
- ``PXB``: several switches, below one host bridge;
- ``PHB``: the paths meet only at the host bridge (the CPU's root complex);
- ``NODE``: different host bridges of one NUMA node;
- ``SYS``: different NUMA nodes (across the socket interconnect), or a NUMA node unknown on
  one side only. Two unknown (-1) nodes are one node: a kernel without NUMA has one.

Shapes checked against real outputs: HGX H100 ``nvidia-smi topo -m`` with one ``PIX`` HCA
per GPU, ``NODE`` to the rest of its socket and ``SYS`` across (NVIDIA/nccl#1453, #1264); an
H100 NCCL topology dump with GPU and ConnectX-7 under one Broadcom switch (aliyun/SimAI#128);
a 16-GPU DGX-2 where two GPUs share a ``PIX`` HCA and see their neighbour's as ``PXB``
(NVIDIA/nccl-tests#78); the nested switches of ``lspci -tv`` in NVIDIA/nccl#246.

Each GPU gets its nearest HCA. Among equally near ones (a DGX A100 pair of GPUs and HCAs
behind one switch tree), GPUs in index order take the HCA that serves the fewest GPUs so far,
then the first by name in natural order (``mlx5_2`` before ``mlx5_10``), as NCCL spreads
GPUs over the HCAs of a tie. The port is the HCA's first ACTIVE port, else port 1.

No HCA, or no NVIDIA driver, is absent hardware. A link that leads nowhere (a broken
``device`` link, a GPU sysfs does not know) is counted in :attr:`TopologyCollector.parse_errors`
and costs only its own device; when every HCA is broken the run fails.

>>> from pathlib import Path
>>> from reflex_localize.collectors.nvml_fake import FakeNvml
>>> tree = Path("tests/fixtures/sysfs_hgx_h100/sys")
>>> rows = list(TopologyCollector("c1", "n1", sys_root=tree, nvml=FakeNvml.h100_node()).collect(0))
>>> [(p.tags["gpu"], p.fields["hca"], p.fields["path"]) for p in rows][:2]
[('0', 'mlx5_0', 'PIX'), ('1', 'mlx5_1', 'PIX')]
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reflex_localize.collectors.base import (
    HardwareAbsent,
    base_tags,
    read_int,
    read_text,
    require_dir,
)
from reflex_localize.collectors.nic import parse_enum
from reflex_localize.collectors.nvml_api import (
    Nvml,
    NvmlError,
    NvmlNotSupported,
    NvmlUnavailable,
    PynvmlApi,
)
from reflex_localize.schemas.codec import Point

if TYPE_CHECKING:
    from reflex_localize.collectors.settings import CollectSettings
    from reflex_localize.influx.config import Identity

log = logging.getLogger(__name__)

PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS")  # nearest first
PORT_ACTIVE = 4  # ports/N/state "4: ACTIVE"
DEFAULT_PORT = 1
_BUS_ID = re.compile(r"^([0-9a-fA-F]{1,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")


class SysfsLinkError(ValueError):
    """A sysfs link that should lead to a PCI device does not."""


@dataclass(frozen=True)
class PciPlace:
    """Where a device sits: host bridge first, then each bridge, then the device itself."""

    chain: tuple[str, ...]
    numa_node: int


@dataclass(frozen=True)
class Hca:
    name: str
    port: int
    place: PciPlace


def sysfs_bus_id(nvml_bus_id: str) -> str:
    """NVML's ``00000000:18:00.0`` as sysfs names it, ``0000:18:00.0``: NVML writes the
    domain in 8 upper-case digits, Linux in at least 4 lower-case ones (VMD domains have 5)."""
    match = _BUS_ID.match(nvml_bus_id.strip())
    if match is None:
        raise SysfsLinkError(f"{nvml_bus_id!r} is not a PCI bus id")
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{device.lower()}.{function}"


def pci_place(link: Path, sys_root: Path) -> PciPlace:
    """The device's place, from the real path of a sysfs link to it; raises SysfsLinkError."""
    devices = (sys_root / "devices").resolve()
    try:
        real = link.resolve(strict=True)
        chain = real.relative_to(devices).parts
    except (OSError, RuntimeError, ValueError) as error:  # missing, a loop, or elsewhere
        raise SysfsLinkError(f"{link} does not lead to a device under {devices}: {error}") from None
    if len(chain) < 2 or not chain[0].startswith("pci"):
        raise SysfsLinkError(f"{link} leads to {real}, not to a PCI device")
    numa = read_int(real / "numa_node")
    return PciPlace(chain, -1 if numa is None else numa)


def pcie_path(gpu: PciPlace, hca: PciPlace) -> str:
    """The ``nvidia-smi topo -m`` relation of two devices; see the module docstring."""
    if gpu.chain[0] != hca.chain[0]:
        return "NODE" if gpu.numa_node == hca.numa_node else "SYS"
    shared = 0
    for mine, theirs in zip(gpu.chain, hca.chain, strict=False):
        if mine != theirs:
            break
        shared += 1
    if shared == 1:
        return "PHB"
    if len(gpu.chain) - shared <= 2 and len(hca.chain) - shared <= 2:
        return "PIX"
    return "PXB"


def natural_key(name: str) -> tuple[str | int, ...]:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def first_active_port(hca_dir: Path) -> int:
    ports = []
    try:
        ports = sorted(int(p.name) for p in (hca_dir / "ports").iterdir() if p.name.isdigit())
    except OSError:
        return DEFAULT_PORT
    for port in ports:
        if parse_enum(read_text(hca_dir / "ports" / str(port) / "state")) == PORT_ACTIVE:
            return port
    return DEFAULT_PORT


def nearest(gpu: PciPlace, hcas: list[Hca], load: dict[str, int]) -> tuple[Hca, str]:
    """The HCA nearest ``gpu``; ties go to the least loaded, then the first by name."""
    paths = {hca.name: pcie_path(gpu, hca.place) for hca in hcas}
    best = min(hcas, key=lambda h: (PATHS.index(paths[h.name]), load[h.name], natural_key(h.name)))
    return best, paths[best.name]


class TopologyCollector:
    """Emits one ``gpu_topology`` point per GPU, at start and every ``interval_s`` after."""

    name = "topology"

    def __init__(
        self,
        cluster: str,
        node: str,
        *,
        sys_root: Path = Path("/sys"),
        nvml: Nvml | None = None,
        interval_s: float = 300.0,
    ) -> None:
        self.sys_root = sys_root
        self.nvml: Nvml = nvml if nvml is not None else PynvmlApi()
        self.interval_s = interval_s
        self.parse_errors: dict[str, int] = {}  # links that led nowhere, by source
        self.last_parse_errors: dict[str, str] = {}
        self._tags = base_tags(cluster, node)
        self._initialized = False

    def collect(self, now_ns: int) -> Iterator[Point]:
        require_dir(self.sys_root, "sys_root")
        hcas = self._hcas()
        gpus = self._gpus()
        load = {hca.name: 0 for hca in hcas}
        for index, (bus_id, place) in gpus.items():
            hca, path = nearest(place, hcas, load)
            load[hca.name] += 1
            fields: dict[str, str | int] = {
                "hca": hca.name, "hca_port": hca.port, "pci_bus_id": bus_id,
                "path": path, "numa_node": place.numa_node,
            }  # fmt: skip
            yield Point("gpu_topology", {**self._tags, "gpu": str(index)}, fields, now_ns)

    def _hcas(self) -> list[Hca]:
        root = self.sys_root / "class" / "infiniband"
        names = sorted((p.name for p in root.iterdir()), key=natural_key) if root.is_dir() else []
        if not names:
            raise HardwareAbsent(f"no InfiniBand/RoCE HCA in {root}")
        hcas = []
        for name in names:
            try:
                place = pci_place(root / name / "device", self.sys_root)
            except SysfsLinkError as error:
                self._count(f"class/infiniband/{name}/device", str(error))
                continue
            hcas.append(Hca(name, first_active_port(root / name), place))
        if not hcas:
            raise SysfsLinkError(f"no HCA in {root} leads to a PCI device: {names}")
        return hcas

    def _gpus(self) -> dict[int, tuple[str, PciPlace]]:
        """GPU index -> (NVML bus id, place), for the GPUs sysfs knows."""
        if not self._initialized:
            try:
                self.nvml.init()
            except NvmlUnavailable as error:
                raise HardwareAbsent(f"no NVIDIA driver: {error}") from None
            self._initialized = True
        gpus = {}
        for index in range(self.nvml.device_count()):
            try:
                bus_id = self.nvml.pci_bus_id(index)
            except NvmlNotSupported:
                continue
            except NvmlError as error:  # a lost GPU: the gpu collector reports it
                log.info("topology: GPU %d has no bus id now: %s", index, error)
                continue
            try:
                link = self.sys_root / "bus" / "pci" / "devices" / sysfs_bus_id(bus_id)
                gpus[index] = (bus_id, pci_place(link, self.sys_root))
            except SysfsLinkError as error:
                self._count(f"bus/pci/devices (GPU {index})", str(error))
        return gpus

    def _count(self, source: str, reason: str) -> None:
        count = self.parse_errors[source] = self.parse_errors.get(source, 0) + 1
        self.last_parse_errors[source] = reason
        if count <= 10 or count % 1000 == 0:
            log.warning("topology collector: %s (%d so far)", reason, count)


def build(identity: Identity, settings: CollectSettings) -> TopologyCollector:
    return TopologyCollector(
        identity.cluster,
        identity.node,
        sys_root=Path(settings.sys_root),
        interval_s=settings.interval("topology", 300.0),
    )
