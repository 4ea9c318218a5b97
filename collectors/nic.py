"""Network interfaces and InfiniBand/RoCE ports, from sysfs.

Sources (relative to ``sys_root``, ``/sys`` on a node):

- ``class/net/DEV/{operstate,speed}`` and ``class/net/DEV/statistics/*``: one ``nic`` point
  per interface. ``speed`` is -1 or EINVAL when the link is down or virtual: absent.
- ``class/infiniband/HCA/ports/N/{state,phys_state,rate,link_layer}``: one ``ib_port`` point
  per port, with ``counters/*`` (the IBA PortCounters, kept by the HCA) and, on mlx5,
  ``hw_counters/*`` (driver counters: out_of_buffer and the RoCE congestion control
  counters np_cnp_sent, rp_cnp_handled, np_ecn_marked_roce_packets).

PFC pause frames are not in sysfs for mlx5 (they are ``ethtool -S`` ``rx_prio*_pause``), so
the ``pfc_*`` fields stay absent: a driver that exposes them in sysfs gets a line in
``IB_HW_COUNTERS``.

>>> from pathlib import Path
>>> collector = NicCollector("c1", "n1", sys_root=Path("tests/fixtures/nic/sys"))
>>> ports = [p for p in collector.collect(0) if p.measurement == "ib_port"]
>>> [(p.tags["hca"], p.fields["port_xmit_data_bytes"]) for p in ports][:1]
[('mlx5_0', 374863364838528)]
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from reflex_localize.collectors.base import base_tags, read_int, read_text, require_dir
from reflex_localize.schemas.codec import Point

if TYPE_CHECKING:
    from reflex_localize.collectors.settings import CollectSettings
    from reflex_localize.influx.config import Identity

DEFAULT_IGNORED_NETDEVS = r"^(lo|veth.*|docker\d+|br-.*|virbr\d+|cali.*|flannel\..*|cni\d+|ifb\d+)$"

NET_STATISTICS = (
    "rx_bytes", "tx_bytes", "rx_packets", "tx_packets",
    "rx_errors", "tx_errors", "rx_dropped", "tx_dropped",
)  # fmt: skip

# counters/ file -> ib_port field, for counters reported in their own unit.
IB_COUNTERS = {
    "symbol_error": "symbol_error",
    "link_error_recovery": "link_error_recovery",
    "link_downed": "link_downed",
    "port_rcv_errors": "port_rcv_errors",
    "port_xmit_discards": "port_xmit_discards",
    "port_xmit_wait": "port_xmit_wait",
    "local_link_integrity_errors": "local_link_integrity_errors",
}

# The IBA quirk, handled here and only here: PortXmitData and PortRcvData count octets
# divided by 4 (IBA spec 1.3, 16.1.3.5: "in units of 4 octets"), so bytes = value * 4.
IB_DATA_COUNTERS_IN_WORDS = {
    "port_xmit_data": "port_xmit_data_bytes",
    "port_rcv_data": "port_rcv_data_bytes",
}
IB_DATA_WORD_BYTES = 4

# hw_counters/ file -> ib_port field. mlx5 names; other drivers use other names, added here.
IB_HW_COUNTERS = {
    "out_of_buffer": "out_of_buffer",
    "np_cnp_sent": "np_cnp_sent",
    "rp_cnp_handled": "rp_cnp_handled",
    "np_ecn_marked_roce_packets": "np_ecn_marked_roce_packets",
}


@dataclass(frozen=True)
class NetDevice:
    name: str
    up: bool
    speed_mbps: int | None
    statistics: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class IbPort:
    """One HCA port. ``counters`` are already in the schema's units (bytes, not words)."""

    hca: str
    port: str
    link_layer: str
    state: int | None
    phys_state: int | None
    rate_gbps: float | None
    counters: dict[str, int] = field(default_factory=dict)


def parse_enum(text: str | None) -> int | None:
    """``"4: ACTIVE"`` -> 4 (ports/N/state and phys_state)."""
    if not text:
        return None
    number = text.partition(":")[0].strip()
    return int(number) if number.isascii() and number.isdigit() else None


def parse_rate(text: str | None) -> float | None:
    """``"200 Gb/sec (4X HDR)"`` -> 200.0 (ports/N/rate)."""
    match = re.match(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*Gb/sec", text or "")
    return float(match.group(1)) if match else None


def read_net_device(directory: Path) -> NetDevice:
    speed = read_int(directory / "speed")
    statistics = {}
    for name in NET_STATISTICS:
        value = read_int(directory / "statistics" / name)
        if value is not None:
            statistics[name] = value
    return NetDevice(
        name=directory.name,
        up=read_text(directory / "operstate") == "up",
        speed_mbps=speed if speed is not None and speed >= 0 else None,
        statistics=statistics,
    )


def read_ib_port(hca: str, directory: Path) -> IbPort:
    counters: dict[str, int] = {}
    for name, field_name in IB_COUNTERS.items():
        value = read_int(directory / "counters" / name)
        if value is not None:
            counters[field_name] = value
    for name, field_name in IB_DATA_COUNTERS_IN_WORDS.items():
        value = read_int(directory / "counters" / name)
        if value is not None:
            counters[field_name] = value * IB_DATA_WORD_BYTES
    for name, field_name in IB_HW_COUNTERS.items():
        value = read_int(directory / "hw_counters" / name)
        if value is not None:
            counters[field_name] = value
    return IbPort(
        hca=hca,
        port=directory.name,
        link_layer=read_text(directory / "link_layer") or "InfiniBand",
        state=parse_enum(read_text(directory / "state")),
        phys_state=parse_enum(read_text(directory / "phys_state")),
        rate_gbps=parse_rate(read_text(directory / "rate")),
        counters=counters,
    )


def _sorted_entries(directory: Path) -> list[Path]:
    try:
        return sorted(directory.iterdir())
    except OSError:
        return []


class NicCollector:
    """Emits one ``nic`` point per interface and one ``ib_port`` point per HCA port."""

    name = "nic"

    def __init__(
        self,
        cluster: str,
        node: str,
        *,
        sys_root: Path = Path("/sys"),
        ignored_netdevs: str = DEFAULT_IGNORED_NETDEVS,
        interval_s: float = 1.0,
    ) -> None:
        self.sys_root = sys_root
        self.interval_s = interval_s
        self._ignored = re.compile(ignored_netdevs)
        self._tags = base_tags(cluster, node)

    def collect(self, now_ns: int) -> Iterator[Point]:
        require_dir(self.sys_root, "sys_root")
        for directory in _sorted_entries(self.sys_root / "class" / "infiniband"):
            for port_dir in _sorted_entries(directory / "ports"):
                yield from self._ib_points(read_ib_port(directory.name, port_dir), now_ns)
        for directory in _sorted_entries(self.sys_root / "class" / "net"):
            if not self._ignored.match(directory.name):
                yield self._net_point(read_net_device(directory), now_ns)

    def _net_point(self, device: NetDevice, now_ns: int) -> Point:
        fields: dict[str, int | bool] = {"up": device.up, **device.statistics}
        if device.speed_mbps is not None:
            fields["speed_mbps"] = device.speed_mbps
        return Point("nic", {**self._tags, "device": device.name}, fields, now_ns)

    def _ib_points(self, port: IbPort, now_ns: int) -> Iterator[Point]:
        fields: dict[str, int | float] = dict(port.counters)
        for key, value in (
            ("state", port.state),
            ("phys_state", port.phys_state),
            ("rate_gbps", port.rate_gbps),
        ):
            if value is not None:
                fields[key] = value
        if fields:
            tags = {**self._tags, "hca": port.hca, "port": port.port}
            yield Point("ib_port", {**tags, "link_layer": port.link_layer}, fields, now_ns)


def build(identity: Identity, settings: CollectSettings) -> NicCollector:
    return NicCollector(
        identity.cluster,
        identity.node,
        sys_root=Path(settings.sys_root),
        interval_s=settings.interval("nic", 1.0),
    )
