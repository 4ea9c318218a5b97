"""An anomaly on many nodes at once belongs to the fabric or the site, not to one node:
fabric-wide congestion lifts transmit-wait on a quarter of a job's ports, a shared filesystem
slows every host's writes. Nodes that all hang under one switch stay judged (the switch rule
names the switch), and two nodes off together are two suspects."""

from __future__ import annotations

import numpy as np

from reflex_localize.flows.incidents.events import Suspect
from reflex_localize.flows.judge.job_evidence import job_wide_phase
from reflex_localize.flows.judge.job_fields import JobConfig
from reflex_localize.flows.judge.job_step import JobState
from reflex_localize.flows.signals.derive import SIGNAL_INDEX, SIGNAL_NAMES

NODES = [f"node-{n:04d}" for n in range(12)]
WAIT = SIGNAL_INDEX["nic_xmit_wait_rate"]


def _masked(off: list[int], switches: dict[str, str]) -> list[bool]:
    entities = np.array([f"{n}|nic|mlx5_0/1" for n in NODES], dtype=object)
    deviation = np.zeros((len(NODES), len(SIGNAL_NAMES)))
    deviation[off, WAIT] = 8.0  # off its own history
    peer = np.zeros_like(deviation)  # and, the rest of the job being calm, hardly off peers
    sites = {node: {"switch": switch} for node, switch in switches.items()}
    phase = job_wide_phase(entities, deviation, peer, False, sites)
    return phase[off, WAIT].tolist()


def test_congestion_on_a_quarter_of_the_nodes_under_several_switches_is_no_node_s() -> None:
    switches = {node: f"leaf-{i % 4}" for i, node in enumerate(NODES)}
    assert _masked([0, 1, 2], switches) == [True] * 3


def test_without_site_tags_a_quarter_of_the_nodes_at_once_is_no_node_s() -> None:
    assert _masked([3, 7, 11], {}) == [True] * 3


def test_three_nodes_under_one_switch_stay_judged_for_the_switch_rule() -> None:
    switches = {node: "leaf-9" if node in NODES[:3] else "leaf-1" for node in NODES}
    assert _masked([0, 1, 2], switches) == [False] * 3


def test_two_nodes_off_together_are_two_suspects() -> None:
    assert _masked([4, 9], {}) == [False] * 2


def _job(congested: list[int], switches: dict[str, str]) -> JobState:
    job = JobState("j", JobConfig())
    job.node_count = len(NODES)
    job.sites = {node: {"switch": switch} for node, switch in switches.items()}
    job.book.amounts = {f"{NODES[n]}|nic|mlx5_0/1": {"nic_xmit_wait_rate": 1.0} for n in congested}
    job.book.amounts[f"{NODES[0]}|gpu|3"] = {"sm_clock_low": 2.0}  # node 0's own fault too
    return job


def _suspect(entity: str) -> Suspect:
    node, component, index = entity.split("|")
    return Suspect(node, component, index, 9.0)


def test_a_lead_whose_every_signal_a_quarter_of_the_nodes_show_is_the_fabric_s() -> None:
    job = _job([0, 4, 8], {node: f"leaf-{i % 3}" for i, node in enumerate(NODES)})
    port = _suspect(f"{NODES[4]}|nic|mlx5_0/1")
    node = _suspect(f"{NODES[8]}|node|-")
    gpu = _suspect(f"{NODES[0]}|gpu|3")
    busy_node = _suspect(f"{NODES[0]}|node|-")  # its congestion and its GPU's own fault
    assert job._local([port, node, gpu, busy_node]) == [gpu, busy_node]


def test_congestion_under_one_switch_stays_for_the_switch_rule() -> None:
    job = _job([0, 4, 8], {node: "leaf-7" for node in NODES})
    port = _suspect(f"{NODES[4]}|nic|mlx5_0/1")
    assert job._local([port]) == [port]
