"""A part slow from the job's first step: its rank is a few percent slower than its stage
peers (under the 15% a straggler needs), and its own history, begun with the fault, calls it
normal. Its peers still see the part. Before, ``hidden_fields``'s from-start HBM clock and
local disk scenarios (written apart from the detector) were missed in 6 of 6 runs, and both
scenarios here raised no event at all."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.judge.job_evidence import peer_groups
from reflex_localize.flows.judge.job_step import JobConfig
from reflex_localize.flows.judge.step_peers import StepPeers
from reflex_localize.flows.messages import RankInfo
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def _events(name: str, mode: str = "reflex") -> list[LocalizationEvent]:
    source = SimulatorSource(str(SCENARIOS / f"{name}.toml"), 7, 1, 10.0)
    return run_in_process(source, job_config=JobConfig(mode=mode)).events


def _tops(events: list[LocalizationEvent]) -> list[tuple[str, tuple[str, str, str]]]:
    return [(e.trigger, (e.top.node, e.top.component, e.top.index)) for e in events if e.top]


def test_a_disk_slow_from_the_first_step_is_told_through_its_ranks() -> None:
    events = _events("disk_slow_from_start")
    assert _tops(events) == [("straggler", ("node-0005", "host", "-"))]
    assert "disk_busy on its host stands" in events[0].summary
    assert "over its latest 9 steps" in events[0].summary


def test_an_hbm_clock_stuck_low_from_the_first_step_is_told() -> None:
    assert _tops(_events("hbm_clock_low_from_start")) == [("straggler", ("node-0004", "gpu", "7"))]


def test_own_history_alone_cannot_tell_a_fault_present_from_the_start() -> None:
    assert _events("hbm_clock_low_from_start", mode="temporal_only") == []


def _members(n: int = 8) -> dict[int, RankInfo]:
    return {r: RankInfo(r, f"n{r // 2}", r % 2, r // 4, 0, 0, 1, "h100") for r in range(n)}


def _judge(peers: StepPeers, slow: list[float], other: float = 10.0) -> None:
    """Steps in which rank 5 computes ``slow[i]`` times what its peers do."""
    members = _members()
    for step, ratio in enumerate(slow):
        compute = {r: other * (ratio if r == 5 else 1.0 + 0.001 * r) for r in members}
        peers.add_step(step, compute, (step + 1) * 10**10)
        peers.judge(members)


def test_a_rank_a_few_percent_slow_for_nine_steps_is_marginal() -> None:
    peers = StepPeers()
    _judge(peers, [1.08] * 8)
    assert peers.marginal() == []  # eight steps are not enough
    _judge(peers, [1.08])
    assert [(f.rank, round(f.ratio, 2), f.steps) for f in peers.marginal()] == [(5, 1.08, 9)]


def test_one_dip_is_noise_two_end_the_streak() -> None:
    one = StepPeers()
    _judge(one, [1.08] * 4 + [1.0] + [1.08] * 4)
    assert [f.rank for f in one.marginal()] == [5]
    two = StepPeers()
    _judge(two, [1.08] * 3 + [1.0] + [1.08] * 2 + [1.0] + [1.08] * 2)
    assert two.marginal() == []


def test_a_binned_gpu_a_few_percent_slow_is_not_marginal() -> None:
    peers = StepPeers()
    _judge(peers, [1.03] * 20)
    assert peers.marginal() == []


def test_a_rank_told_is_told_again_only_after_it_came_back() -> None:
    peers = StepPeers()
    _judge(peers, [1.08] * 9)
    peers.marginal_told.add(5)
    _judge(peers, [1.0] + [1.08] * 8)  # hovering: still the same slowness
    assert peers.marginal() == []
    _judge(peers, [1.0] * 9 + [1.08] * 9)  # back with its peers, then slow again
    assert [f.rank for f in peers.marginal()] == [5]


def test_hosts_of_two_node_stages_are_judged_across_the_job() -> None:
    members = {
        r: RankInfo(r, f"n{r // 8}", r % 8, r // 16, (r // 8) // 2, r % 8, 4, "h100")
        for r in range(64)
    }
    hosts = [f"n{n}|host|-" for n in range(8)]
    gpus = [f"n{n}|gpu|{g}" for n in range(8) for g in range(8)]
    entities = np.array(hosts + gpus, dtype=object)
    groups = peer_groups(entities, np.array(["h100"] * len(entities), dtype=object), members)
    assert set(groups[:8].tolist()) == {"host|any|h100"}
    # A stage's GPUs (sixteen of them) still have their stage's peers.
    assert groups[8:].tolist() == [f"gpu|{n // 2}|h100" for n in range(8) for _ in range(8)]
