"""A GPU that comes into a job already slow (flows/judge/busy_clocks.py,
flows/judge/rank_drift.py): its clock in the last job it served is its history, where this
job has none.

The flow test runs a memory_matters scenario written apart from the detector: node-0002 serves
job a healthy, and GPU 2 runs 2.5% slow (no throttle reason) from job b's first step, inside
the band of the fleet's binned GPUs.
"""

from __future__ import annotations

import numpy as np
from memory_family_runs import run_memory_family

from reflex_localize.flows.judge.busy_clocks import BusyClocks, window_clocks
from reflex_localize.flows.judge.rank_drift import HOLD_S, Drift, RankDrift
from reflex_localize.flows.signals.derive import SIGNAL_NAMES

STEP_NS = 8 * 10**9
CLOCK = 1950.0


def _run(
    ratio: float, clock: float, steps: int = 60, power_capped: bool = False
) -> list[tuple[int, Drift]]:
    """Rank 1 came from a job where its GPU held CLOCK; here it steps at ``ratio`` to the
    job's level with ``clock`` (rank 0 steady, no past). Every drift told, with its step."""
    drift = RankDrift()
    drift.past = {1: (CLOCK, "job-a")}
    told = []
    for step in range(steps):
        reasoned = {1} if power_capped else set()
        drift.observe_clocks({0: CLOCK, 1: clock}, set(), reasoned)
        told += [(step, d) for d in drift.observe_step({0: 1.0, 1: ratio}, step * STEP_NS)]
    return told


def test_a_gpu_slower_than_in_its_last_job_is_told_once_after_the_hold() -> None:
    told = _run(1.03, CLOCK * 0.975)
    assert len(told) == 1
    step, drift = told[0]
    assert drift.past_job == "job-a" and round(drift.clock_drop, 3) == 0.025
    assert step * STEP_NS / 1e9 >= HOLD_S


def test_a_slower_clock_that_costs_the_job_nothing_is_not_told() -> None:
    """The rank computes at the job's level: the clock is not why anything is slow."""
    assert _run(1.0, CLOCK * 0.975) == []


def test_a_clock_held_at_the_power_cap_says_nothing_of_the_gpu() -> None:
    """At the power cap the clock follows what the job computes, so it is not held against
    another job's."""
    assert _run(1.03, CLOCK * 0.975, power_capped=True) == []


def test_the_same_clock_as_in_its_last_job_is_no_drift() -> None:
    """A binned GPU is slow in every job: against its own last job nothing changed."""
    assert _run(1.03, CLOCK) == []


def test_every_node_slower_than_in_its_last_job_is_the_jobs_doing() -> None:
    """A job that sets its GPUs' clocks lower (or a workload the clock follows): every GPU
    with a past dropped, so none is told, not even the last pipeline stage's, which computes
    slower anyway."""
    drift = RankDrift()
    ranks = range(16)  # two ranks on each of eight nodes
    drift.past = {rank: (CLOCK, "job-a") for rank in ranks}
    drift.node_of = {rank: f"n{rank // 2}" for rank in ranks}
    told = []
    for step in range(60):
        drift.observe_clocks({rank: CLOCK * 0.9 for rank in ranks}, set(), set())
        ratios = {rank: 1.08 if rank >= 14 else 1.0 for rank in ranks}
        told += drift.observe_step(ratios, step * STEP_NS)
    assert told == []


def _values(clock: float, reason: str = "") -> np.ndarray:
    row = np.zeros(len(SIGNAL_NAMES))
    row[SIGNAL_NAMES.index("sm_clock_low")] = clock
    if reason:
        row[SIGNAL_NAMES.index(reason)] = 1.0
    return row


def test_only_a_jobs_windows_without_a_clock_reason_are_kept() -> None:
    entities = np.array(["n1|gpu|0", "n1|gpu|1", "n2|gpu|0", "n1|host|0"], dtype=object)
    values = np.vstack(
        [_values(1950.0), _values(1500.0, "throttle_sw_power_cap"), _values(1940.0), _values(1.0)]
    )
    # n2 serves two jobs at once: its GPUs' clocks belong to neither.
    kept = window_clocks({"n1": {"a"}, "n2": {"a", "b"}}, entities, values)
    assert kept == {"a": {"n1|gpu|0": 1950.0}}


def test_a_job_too_short_leaves_the_last_jobs_clock_in_place() -> None:
    clocks = BusyClocks()
    for _ in range(20):
        clocks.observe("a", {"n1|gpu|0": 1950.0})
    clocks.end("a")
    for _ in range(3):
        clocks.observe("b", {"n1|gpu|0": 1500.0})
    clocks.end("b")
    assert clocks.of_nodes({"n1"}) == {"n1|gpu|0": (1950.0, "a")}
    assert clocks.of_nodes({"n2"}) == {}


def test_a_running_job_has_no_last_clock_and_a_requeued_one_has_its_earlier_runs() -> None:
    clocks = BusyClocks()
    for _ in range(20):
        clocks.observe("a", {"n1|gpu|0": 1950.0})
    assert clocks.of_nodes({"n1"}) == {}
    clocks.end("a")  # requeued under its own name after a crash: its earlier run is history
    assert clocks.of_nodes({"n1"}) == {"n1|gpu|0": (1950.0, "a")}


def test_a_gpu_slow_from_the_jobs_first_step_is_named_by_its_last_job() -> None:
    events, onset_ns = run_memory_family("reflex", "gpu_drift_from")
    drifts = [e for e in events if e.trigger == "drift"]
    assert [(e.top.node, e.top.component, e.top.index) for e in drifts] == [
        ("node-0002", "gpu", "2")
    ]
    assert "2.5% below what it held in job a" in drifts[0].summary
    assert HOLD_S <= (drifts[0].time_ns - onset_ns) / 1e9 <= 600


def test_peers_alone_do_not_name_it() -> None:
    events, _ = run_memory_family("peer_only", "gpu_drift_from")
    assert [e for e in events if e.trigger == "drift"] == []
