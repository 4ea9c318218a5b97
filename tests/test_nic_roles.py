"""A management port beside the compute HCAs is no slow rail: every node of the fleet has one.

Ports are peers only of ports of their role, so a 25 GbE port is not judged against 400 Gb/s
HCAs, and a port that carries none of the job's collectives is never its communication
straggler. A rail that trains down is still judged against the other rails."""

from __future__ import annotations

import numpy as np
import pytest

from reflex_localize.flows.judge import job_evidence
from reflex_localize.flows.judge.job_evidence import EvidenceBook
from reflex_localize.flows.judge.job_fields import JobConfig, default_weights
from reflex_localize.flows.judge.job_step import JobState
from reflex_localize.flows.judge.nic_roles import nic_roles
from reflex_localize.flows.messages import ExplicitEvent, RankInfo
from reflex_localize.flows.signals.derive import SIGNAL_INDEX, SIGNAL_NAMES

PROFILE = "h100-sxm5-80gb"
NODES = [f"node-{n:04d}" for n in range(8)]
RAILS = [f"mlx5_{i}/1" for i in range(4)]
WEIGHTS = default_weights()


def _window(rail_rate: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """Every node's four 400 Gb/s rails and one 25 GbE management port (an Ethernet port of
    /sys/class/infiniband, as a ConnectX-6 Lx is); ``rail_rate`` overrides a port's rate."""
    entities, rates = [], []
    for node in NODES:
        for port in [*RAILS, "mlx5_4/1"]:
            entity = f"{node}|nic|{port}"
            entities.append(entity)
            rates.append(rail_rate.get(entity, 25.0 if port == "mlx5_4/1" else 400.0))
    values = np.full((len(entities), len(SIGNAL_NAMES)), np.nan)
    values[:, SIGNAL_INDEX["nic_rate_low"]] = rates
    return np.array(entities, dtype=object), values


def _evidence(book: EvidenceBook, rail_rate: dict[str, float], end_ns: int) -> dict[str, float]:
    entities, values = _window(rail_rate)
    members = {
        rank: RankInfo(rank, node, gpu, rank // 4, 0, gpu, 1, PROFILE)
        for rank, (node, gpu) in enumerate((n, g) for n in NODES for g in range(4))
    }
    totals: dict[str, float] = {}
    book.signals(
        entities,
        values,
        np.full(values.shape, np.nan),  # a new job: every baseline still warming up
        np.full(values.shape, np.nan),
        np.array([PROFILE] * len(entities), dtype=object),
        members,
        "reflex",
        lambda profile: WEIGHTS[profile],
        end_ns,
        totals,
    )
    return totals


def test_a_management_port_every_node_has_is_no_evidence() -> None:
    book = EvidenceBook()
    totals = _evidence(book, {}, 10**10)
    assert {e: t for e, t in totals.items() if t > 0} == {}
    assert book.nic_role["node-0003|nic|mlx5_4/1"] == "other"
    assert book.nic_role["node-0003|nic|mlx5_0/1"] == "rail"


def test_a_rail_trained_down_stays_a_rail_and_stands_out() -> None:
    book = EvidenceBook()
    _evidence(book, {}, 10**10)
    slow = "node-0005|nic|mlx5_2/1"
    totals = _evidence(book, {slow: 100.0}, 2 * 10**10)
    assert book.nic_role[slow] == "rail"
    assert [e for e, t in totals.items() if t > 0] == [slow]


def test_without_roles_the_management_port_looked_like_a_slow_rail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the roles change: the same window judged with every port one kind."""
    monkeypatch.setattr(job_evidence, "nic_roles", lambda *args: {})
    totals = _evidence(EvidenceBook(), {}, 10**10)
    assert sorted(e for e, t in totals.items() if t > 0) == [f"{n}|nic|mlx5_4/1" for n in NODES]


def test_a_port_that_is_no_rail_going_down_is_a_warning_a_rail_going_down_critical() -> None:
    job = JobState("j", JobConfig())
    job.book.nic_role = {"n1|nic|eno1": "other", "n1|nic|mlx5_0/1": "rail"}

    def down(port: str) -> ExplicitEvent:
        return ExplicitEvent(0, "n1", "link_down", 1, "nic", port, "critical", "link down", "")

    assert job._off_rail(down("eno1")).severity == "warning"
    assert job._off_rail(down("mlx5_0/1")).severity == "critical"
    assert job._off_rail(down("eth9")).severity == "critical"  # a port no window has judged


def test_an_ipoib_netdev_is_its_hca_s_face_whatever_its_reported_speed() -> None:
    entities = np.array(["n1|nic|mlx5_2/1", "n1|nic|ib2", "n1|nic|eno1"], dtype=object)
    rates = np.array([400.0, 10.0, 25.0])  # IPoIB's reported speed says nothing of the rail
    roles = nic_roles(entities, rates, {"n1|gpu|2": "n1|nic|mlx5_2/1"}, {})
    assert roles == {"n1|nic|mlx5_2/1": "rail", "n1|nic|ib2": "rail", "n1|nic|eno1": "other"}
