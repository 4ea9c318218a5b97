"""Silent data corruption: one replica's loss jumps alone, and its GPUs are named.

The library's ``fault_sdc`` leaves nothing but that jump (the flow of a349e62 was silent on
it). The unit cases hold the rule to what a real hook reports: a loss only on the last
pipeline stage (the others log nothing or 0), a hard batch that is not a fault, and the step
after the allreduce, when every replica's loss jumps together."""

from __future__ import annotations

import numpy as np
import pytest

from reflex_localize.flows.judge.loss_divergence import diverging_ranks
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource
from reflex_localize.simulator import Simulation, load_scenario

SDC = "fault_sdc"


def test_a_loss_reported_by_the_last_stage_only_still_names_its_replica() -> None:
    # 16 ranks, pp=2: ranks 0-7 log 0 (no loss before the last stage), 8-15 log a loss.
    loss = np.concatenate([np.zeros(8), [2.0, 2.1, 1.9, 2.0, 9.5, 2.05, 1.95, 2.0]])
    assert diverging_ranks(np.arange(16), np.full(16, 7), loss, world=16) == (7, [12])


def test_a_hard_batch_or_the_whole_job_jumping_is_no_divergence() -> None:
    ranks, steps = np.arange(8), np.full(8, 3)
    hard = np.array([2.0, 2.1, 2.0, 5.5, 2.0, 1.9, 2.0, 2.1])  # 2.7x: a hard batch
    assert diverging_ranks(ranks, steps, hard, world=8) is None
    # The step after the allreduce: every replica's loss is up, none 3x the others'.
    everyone = np.array([40.0, 45.0, 38.0, 41.0, 60.0, 61.0, 39.0, 40.0])
    assert diverging_ranks(ranks, steps, everyone, world=8) is None
    three = np.array([2.0, 2.0, 2.0, 12.0, 12.0, 12.0, 2.0, 2.0])  # 3 of 8: not one replica
    assert diverging_ranks(ranks, steps, three, world=8) is None


def test_a_step_cut_by_the_window_edge_is_not_judged() -> None:
    loss = np.array([2.0, 2.0, 12.0])  # 3 of 16 ranks reported this step in the window
    assert diverging_ranks(np.arange(3), np.full(3, 5), loss, world=16) is None


@pytest.mark.slow
def test_silent_data_corruption_names_the_replicas_gpus_on_every_node() -> None:
    sim = Simulation(load_scenario(SDC), seed=7)
    events = run_in_process(SimulatorSource(SDC, 7, 1, 10.0)).events
    [label] = sim.truth
    told = [e for e in events if e.trigger == "loss_divergence"]
    assert len(told) == 1, [e.summary for e in events]
    event = told[0]
    assert event.severity == "warning" and "DCGM" in event.action
    # Which of the replica's GPUs computed wrong nothing tells: each of its nodes leads a GPU
    # among the first suspects, the faulty one's among them.
    replica_nodes = {s.node for s in event.suspects if s.evidence[0].signal == "loss_divergence"}
    assert label.node in replica_nodes
    firsts = [s.node for s in event.suspects[: len(replica_nodes)]]
    assert sorted(firsts) == sorted(replica_nodes)
    assert (event.time_ns - sim.start_ns) / 1e9 - 300 <= 20  # told within two windows
