"""The GPU <-> HCA map (``gpu_topology``) on sysfs fixture trees of real shapes
(``tests/fixtures/sysfs_trees.py`` says where each shape comes from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_localize.collectors.agent import Agent
from reflex_localize.collectors.base import FixedClock
from reflex_localize.collectors.nvml_fake import FakeNvml
from reflex_localize.collectors.topology import (
    PciPlace,
    TopologyCollector,
    pci_place,
    pcie_path,
    sysfs_bus_id,
)
from reflex_localize.schemas.codec import Point, validate

FIXTURES = Path(__file__).parent / "fixtures"
T0 = 1_700_000_000_000_000_000


def tree(name: str) -> Path:
    return FIXTURES / f"sysfs_{name}" / "sys"


def collector(name: str, **options: object) -> TopologyCollector:
    nvml = options.pop("nvml", None) or FakeNvml.h100_node()
    return TopologyCollector("c1", "n1", sys_root=tree(name), nvml=nvml, **options)  # type: ignore[arg-type]


def rails(points: list[Point]) -> dict[int, tuple[object, ...]]:
    return {
        int(p.tags["gpu"]): (p.fields["hca"], p.fields["hca_port"], p.fields["path"])
        for p in points
    }


def test_hgx_h100_every_gpu_has_the_hca_on_its_switch() -> None:
    points = list(collector("hgx_h100").collect(T0))
    assert [validate(p) for p in points] == points  # schema-valid as they are
    assert rails(points) == {
        0: ("mlx5_0", 1, "PIX"), 1: ("mlx5_1", 1, "PIX"), 2: ("mlx5_2", 1, "PIX"),
        3: ("mlx5_3", 1, "PIX"), 4: ("mlx5_4", 1, "PIX"),
        5: ("mlx5_5", 2, "PIX"),  # port 1 DOWN, port 2 ACTIVE
        6: ("mlx5_6", 1, "PIX"),
        7: ("mlx5_7", 1, "PIX"),  # no port ACTIVE: port 1
    }  # fmt: skip
    assert [p.fields["numa_node"] for p in points] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert points[3].fields["pci_bus_id"] == "00000000:5D:00.0"  # as NVML and gpu_info say
    assert points[0].tags == {"cluster": "c1", "node": "n1", "gpu": "0"}


def test_hgx_h100_relations_match_nvidia_smi_topo() -> None:
    sys_root = tree("hgx_h100")
    gpu0 = pci_place(sys_root / "bus/pci/devices/0000:18:00.0", sys_root)
    hca = {
        n: pci_place(sys_root / f"class/infiniband/mlx5_{n}/device", sys_root) for n in (0, 1, 4)
    }
    # NVIDIA/nccl#1453: PIX to its own HCA, NODE on its socket, SYS across.
    assert [pcie_path(gpu0, hca[n]) for n in (0, 1, 4)] == ["PIX", "NODE", "SYS"]


def test_shared_rail_gpus_share_hcas_and_ties_spread() -> None:
    assert rails(list(collector("shared_rail").collect(T0))) == {
        # DGX-2 shape: two GPUs share the HCA on their lower switch (PIX), not the other (PXB).
        0: ("mlx5_0", 1, "PIX"), 1: ("mlx5_0", 1, "PIX"),
        2: ("mlx5_1", 1, "PIX"), 3: ("mlx5_1", 1, "PIX"),
        # DGX A100 shape: every GPU-HCA pair PXB; least loaded, then by name, in GPU order.
        4: ("mlx5_2", 1, "PXB"), 5: ("mlx5_3", 1, "PXB"),
        6: ("mlx5_2", 1, "PXB"), 7: ("mlx5_3", 1, "PXB"),
    }  # fmt: skip


@pytest.mark.parametrize(
    ("gpu", "hca", "expected"),
    [
        (("pci0000:00", "rp", "0000:01:00.0"), ("pci0000:00", "rp", "0000:01:00.1"), "PIX"),
        (("pci0000:00", "0000:00:01.0"), ("pci0000:00", "0000:00:02.0"), "PHB"),  # a VM's flat bus
        (("pci0000:00", "r", "u", "d", "u2", "d2", "g"), ("pci0000:00", "r", "u", "e", "n"), "PXB"),
        (("pci0000:00", "r", "g"), ("pci0000:80", "r", "n"), "SYS"),
    ],
)  # fmt: skip
def test_relations_from_the_lowest_common_ancestor(
    gpu: tuple[str, ...], hca: tuple[str, ...], expected: str
) -> None:
    assert pcie_path(PciPlace(gpu, 0), PciPlace(hca, 1 if expected == "SYS" else 0)) == expected
    assert pcie_path(PciPlace(("pci0000:00", "g"), -1), PciPlace(("pci0000:80", "n"), -1)) == "NODE"


def test_nvml_and_sysfs_spell_bus_ids_differently() -> None:
    assert sysfs_bus_id("00000000:5D:00.0") == "0000:5d:00.0"
    assert sysfs_bus_id("00010000:E1:00.0") == "10000:e1:00.0"  # a VMD domain


def test_no_hca_is_absent_hardware_not_an_error() -> None:
    agent = Agent([collector("no_hca")], lambda _: None, cluster="c1", node="n1")
    (metric,) = agent.run_once()
    assert metric.fields["success"] is True and metric.fields["errors"] == 0
    assert metric.fields["points"] == 0


def test_no_driver_is_absent_hardware() -> None:
    nvml = FakeNvml.h100_node()
    nvml.available = False
    agent = Agent([collector("hgx_h100", nvml=nvml)], lambda _: None, cluster="c1", node="n1")
    (metric,) = agent.run_once()
    assert metric.fields["success"] is True and metric.fields["points"] == 0


def test_a_broken_link_is_counted_and_the_agent_keeps_going() -> None:
    topology = collector("broken_link")
    agent = Agent([topology], lambda _: None, cluster="c1", node="n1", clock=FixedClock(T0))
    *points, metric = agent.run_once()
    assert metric.fields["success"] is True and metric.fields["errors"] == 1
    assert "mlx5_3/device" in next(iter(topology.last_parse_errors.values()))
    # GPU 3 lost its own HCA: it takes the nearest left (NODE), the first by name of a tie.
    assert rails(points)[3] == ("mlx5_0", 1, "NODE")
    assert len(points) == 8
    *_, again = agent.run_once()
    assert again.fields["errors"] == 2, "a counter since start"


def test_every_hca_broken_fails_the_run(tmp_path: Path) -> None:
    ib = tmp_path / "class" / "infiniband" / "mlx5_0"
    ib.mkdir(parents=True)
    (ib / "device").symlink_to(tmp_path / "nowhere")
    agent = Agent([TopologyCollector("c1", "n1", sys_root=tmp_path, nvml=FakeNvml.h100_node())],
                  lambda _: None, cluster="c1", node="n1")  # fmt: skip
    (metric,) = agent.run_once()
    assert metric.fields["success"] is False


def test_a_gpu_sysfs_does_not_know_is_counted() -> None:
    class Elsewhere(FakeNvml):
        def pci_bus_id(self, gpu: int) -> str:
            return "00000000:77:00.0" if gpu == 2 else super().pci_bus_id(gpu)

    topology = collector("hgx_h100", nvml=Elsewhere(FakeNvml.h100_node().gpus))
    points = list(topology.collect(T0))
    assert sorted(rails(points)) == [0, 1, 3, 4, 5, 6, 7]
    assert topology.parse_errors == {"bus/pci/devices (GPU 2)": 1}
