"""NIC and InfiniBand/RoCE collectors against fixture sysfs trees.

``tests/fixtures/nic/sys/class/net/{eth0,lo}`` were captured on a real (virtio) machine;
``class/infiniband`` and the ib0/ib1/ens1f0np0 netdevs are hand-written with the mlx5 file
names and layout: mlx5_0 a healthy HDR port, mlx5_1 a flapping one, mlx5_2 a RoCE port.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from reflex_localize.collectors.nic import (
    NicCollector,
    parse_enum,
    parse_rate,
    read_ib_port,
    read_net_device,
)
from reflex_localize.schemas.codec import encode

SYS = Path(__file__).parent / "fixtures" / "nic" / "sys"
GOLDEN = Path(__file__).parent / "golden"
T0 = 1_700_000_000_000_000_000


def check_golden(name: str, lines: list[str]) -> None:
    """Compares with tests/golden/NAME; REFLEX_UPDATE_GOLDEN=1 rewrites it (review the diff)."""
    path = GOLDEN / name
    text = "".join(line + "\n" for line in lines)
    if os.environ.get("REFLEX_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs from the golden file; review, then update"


def test_ib_data_counters_are_words_of_four_bytes() -> None:
    port = read_ib_port("mlx5_0", SYS / "class" / "infiniband" / "mlx5_0" / "ports" / "1")
    raw = int((SYS / "class/infiniband/mlx5_0/ports/1/counters/port_xmit_data").read_text())
    assert port.counters["port_xmit_data_bytes"] == raw * 4
    assert port.state == 4 and port.phys_state == 5 and port.rate_gbps == 200.0
    assert port.link_layer == "InfiniBand"
    assert "np_cnp_sent" not in port.counters, "IB ports have no RoCE CC counters"


def test_roce_port_has_congestion_counters() -> None:
    port = read_ib_port("mlx5_2", SYS / "class" / "infiniband" / "mlx5_2" / "ports" / "1")
    assert port.link_layer == "Ethernet"
    assert port.counters["np_cnp_sent"] == 884132
    assert port.counters["rp_cnp_handled"] == 901177
    assert port.counters["np_ecn_marked_roce_packets"] == 1773019
    assert "pfc_rx_pause_frames" not in port.counters, "mlx5 has no PFC counters in sysfs"


def test_parsers() -> None:
    assert parse_enum("4: ACTIVE") == 4 and parse_enum("") is None
    assert parse_rate("2.5 Gb/sec (1X SDR)") == 2.5 and parse_rate("garbage") is None


def test_virtio_speed_minus_one_and_einval_are_absent() -> None:
    eth0 = read_net_device(SYS / "class" / "net" / "eth0")
    assert eth0.speed_mbps is None and eth0.up
    assert read_net_device(SYS / "class" / "net" / "lo").speed_mbps is None


def test_loopback_is_ignored_and_no_infiniband_is_fine(tmp_path: Path) -> None:
    shutil.copytree(SYS / "class" / "net", tmp_path / "class" / "net")
    points = list(NicCollector("c1", "n1", sys_root=tmp_path).collect(T0))
    assert {p.measurement for p in points} == {"nic"}
    assert "lo" not in {p.tags["device"] for p in points}


def test_golden_nic_line_protocol() -> None:
    collector = NicCollector("c1", "fixture-node", sys_root=SYS)
    check_golden("nic.lp", [encode(p) for p in collector.collect(T0)])
