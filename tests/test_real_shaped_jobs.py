"""Jobs shaped like real deployments: only the training hook, membership without the fields
a hook may not know, steps longer than a window, two ranks per stage, a fault from the first
step, a stage slower from the start, a node gone under a file sink.

Each of these failed before the flow learned to judge per step (flows/judge/step_peers.py), to give
missing membership fields defaults, and to count whatever a node sends as a sign of life.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from bytewax.testing import run_main
from hook_jobs import START_NS, WINDOW_S, HookJob, source_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.io.sinks import file_sinks, read_events
from reflex_localize.flows.io.sources import MemorySource, split_windows
from reflex_localize.flows.localize import build_flow
from reflex_localize.flows.runner import RunResult, run_in_process
from reflex_localize.schemas.codec import FieldValue, Point, decode, encode
from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator import Simulation, load_scenario


def _run(job: HookJob) -> RunResult:
    return run_in_process(source_of(job.points()), window_seconds=WINDOW_S)


def _slow(rank_slow: int, slow_s: float = 45.0, normal_s: float = 20.0):
    return lambda rank, step: slow_s if rank == rank_slow else normal_s + 0.01 * rank


def _after_start_s(event: LocalizationEvent) -> float:
    return (event.time_ns - START_NS) / 1e9


def test_a_hook_that_knows_no_profile_or_gpu_still_gets_its_straggler_named() -> None:
    """One rank computes 45 s a step where the others take 20 s, from the first step, steps
    of 47 s; the hook writes no profile and no GPU index."""
    job = HookJob(nodes=4, ranks_per_node=2, step_s=47.0, compute=_slow(5))
    result = _run(job)
    assert not result.errors, result.error_counts
    (event,) = result.events
    assert event.trigger == "straggler" and event.severity == "warning"
    top = event.top
    # Launchers give a node's GPUs to its ranks in rank order: rank 5 is node-02's second.
    assert top is not None and top.entity == f"{job.node_of(5)}|gpu|1"
    assert "rank 5" in event.summary and "125% longer" in event.summary
    assert "GPU by rank order" in event.summary
    # Three steps (141 s) or 60 s, whichever is later; events leave at a window's end.
    assert _after_start_s(event) <= max(3 * job.step_s, 60) + WINDOW_S


@pytest.mark.parametrize("step_s", [2.0, 8.0, 25.0, 47.0])
def test_a_launch_straggler_is_reported_within_three_steps_whatever_the_step_length(
    step_s: float,
) -> None:
    job = HookJob(
        nodes=4, ranks_per_node=2, step_s=step_s, steps=max(8, int(300 / step_s)),
        compute=_slow(3, 0.9 * step_s, 0.4 * step_s), omit=(),
    )  # fmt: skip
    result = _run(job)
    stragglers = [e for e in result.events if e.trigger == "straggler"]
    assert len(stragglers) == 1, [e.summary for e in result.events]
    top = stragglers[0].top
    assert top is not None and top.entity == f"{job.node_of(3)}|gpu|1"
    assert _after_start_s(stragglers[0]) <= max(3 * step_s, 60) + WINDOW_S
    assert result.events == stragglers  # no other event: one incident, one event


def test_two_data_parallel_ranks_per_stage_are_compared() -> None:
    """Four pipeline stages, two ranks each: a group of two is still a group of peers."""
    job = HookJob(nodes=4, ranks_per_node=2, pp_size=4, step_s=12.0, compute=_slow(6, 30.0, 20.0),
                  omit=())  # fmt: skip
    result = _run(job)
    (event,) = result.events
    assert event.trigger == "straggler"
    assert event.top is not None and event.top.entity == f"{job.node_of(6)}|gpu|0"


def test_a_stage_slower_from_the_start_is_no_hardware_fault() -> None:
    job = HookJob(
        nodes=4, ranks_per_node=2, pp_size=2, step_s=20.0, steps=15,
        compute=lambda rank, step: (13.5 if rank % 2 == 1 else 10.0) + 0.01 * rank, omit=(),
    )  # fmt: skip
    result = _run(job)
    (event,) = result.events
    assert event.trigger == "step_pattern" and event.severity == "info"
    assert event.no_hardware_fault and "stage 1 is 35% slower" in event.summary
    assert _after_start_s(event) <= 5 * job.step_s + WINDOW_S


def test_steps_that_follow_the_data_are_no_hardware_fault() -> None:
    """Sequence lengths vary per replica and step: the slowest rank changes every step."""
    noise = np.random.default_rng(3).lognormal(0.0, 0.18, size=(8, 30))
    job = HookJob(
        nodes=4, ranks_per_node=2, step_s=20.0, steps=30,
        compute=lambda rank, step: 10.0 * float(noise[rank, step]), omit=(),
    )  # fmt: skip
    result = _run(job)
    assert [e.trigger for e in result.events] == ["step_pattern"]
    assert result.events[0].no_hardware_fault and "follows the data" in result.events[0].summary


def test_a_hook_only_job_that_runs_well_raises_nothing() -> None:
    """No agent: no node is missing because no node sends GPU telemetry, even with steps
    five windows apart; and a balanced job has no pattern to report."""
    job = HookJob(
        nodes=6, ranks_per_node=2, step_s=47.0, steps=14, omit=(),
        compute=lambda rank, step: 20.0 + 0.05 * ((rank * 7 + step) % 5),
    )  # fmt: skip
    result = _run(job)
    assert result.events == [] and not result.errors


def test_a_hook_only_node_that_goes_silent_is_missing_after_its_own_cadence() -> None:
    job = HookJob(nodes=4, ranks_per_node=2, step_s=47.0, steps=14, omit=())
    silent_from = START_NS + 200 * 10**9
    points = [
        p for p in job.points() if not (p.tags["node"] == "node-02" and p.time_ns >= silent_from)
    ]
    result = run_in_process(source_of(points), window_seconds=WINDOW_S)
    missing = [e for e in result.events if e.top is not None and e.top.node == "node-02"]
    assert len(missing) == 1 and "no telemetry" in missing[0].summary
    assert missing[0].trigger == "explicit"


def _without_node_after(frames: list[Frame], node: str, after_ns: int) -> list[Frame]:
    out = []
    for frame in frames:
        drop = (frame.tags["node"] == node) & (frame.time_ns >= after_ns)
        out.append(frame.take(~drop) if drop.any() else frame)
    return out


def test_a_missing_node_event_goes_through_the_file_sink(tmp_path: Path) -> None:
    """The node_missing event's score point once had an empty index tag, which the codec
    refuses inside the sink: the whole `reflex flow --sink files` run died."""
    sim = Simulation(load_scenario("benign_quiet"), seed=7)
    frames = [frame for chunk in sim.chunks(seconds=10) for frame in chunk]
    node = sim.cluster.jobs[0].nodes[1]
    kept = _without_node_after(frames, node, sim.start_ns + 200 * 10**9)
    ordered = sorted(split_windows(kept, int(WINDOW_S * 1e9)), key=lambda w: w[0])
    source = MemorySource([(w, f) for w, f, _ in ordered], WINDOW_S)
    run_main(build_flow(source, file_sinks(tmp_path), window_seconds=WINDOW_S))
    events = read_events(tmp_path / "events.jsonl")
    assert any(e.top is not None and e.top.node == node for e in events)
    lines = (tmp_path / "outputs.lp").read_text().splitlines()
    assert lines and all(decode(line) for line in lines)


def _encodable(route: str, item: object, bad: list[str]) -> None:
    points: list[Point] = []
    if route == "event":
        assert isinstance(item, LocalizationEvent)
        points = [item.to_point()]
    elif route == "points":
        points = item  # type: ignore[assignment]
    for point in points:
        try:
            encode(point)
        except ValueError as error:
            bad.append(f"{point.measurement} {point.tags}: {error}")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.integers(2, 5),
    ranks_per_node=st.integers(1, 3),
    pp_size=st.sampled_from([1, 2]),
    step_s=st.floats(1.0, 60.0),
    omit=st.sets(
        st.sampled_from(["profile", "gpu", "world_size", "dp_rank", "pp_rank", "pp_size"])
    ),
    slow_rank=st.integers(-1, 5),
    silent=st.sets(st.integers(0, 4), max_size=2),
)
def test_every_event_and_score_point_the_flow_emits_passes_the_codec(
    nodes: int, ranks_per_node: int, pp_size: int, step_s: float, omit: set[str],
    slow_rank: int, silent: set[int],
) -> None:  # fmt: skip
    job = HookJob(
        nodes=nodes, ranks_per_node=ranks_per_node, pp_size=pp_size, step_s=step_s,
        steps=max(4, math.ceil(240 / step_s)), compute=_slow(slow_rank, 0.9 * step_s, 0.4 * step_s),
        omit=tuple(sorted(omit)), silent_nodes={f"node-{n:02d}" for n in silent},
    )  # fmt: skip
    bad: list[str] = []
    run_in_process(
        source_of(job.points()),
        window_seconds=WINDOW_S,
        on_output=lambda route, item: _encodable(route, item, bad),
    )
    assert bad == []


def test_a_crash_on_a_hook_only_cluster_names_the_gpu_from_its_exit_message() -> None:
    """No agent, so no XID: the first rank's exit says the CUDA runtime lost the device, the
    others time out a minute later. Before, a 'software failure' with no suspect."""
    job = HookJob(nodes=4, ranks_per_node=2, step_s=8.0, steps=40, omit=("gpu",))
    crash_ns = START_NS + 200 * 10**9
    points = [p for p in job.points() if p.time_ns < crash_ns]
    for rank in range(job.world_size):
        first = rank == 5
        when = crash_ns + (10**9 if first else 65 * 10**9 + rank * 10**8)
        message = (
            "[rank5] process exited: CUDA error: unspecified launch failure"
            if first
            else f"[rank{rank}] process exited after NCCL watchdog timeout"
        )
        tags = {"cluster": "c1", "node": job.node_of(rank), "source": "training"}
        fields: dict[str, FieldValue] = {
            "job": job.job,
            "rank": rank,
            "code": 1,
            "message": message,
        }
        points.append(Point("event", {**tags, "kind": "process_exit"}, fields, when))
    result = run_in_process(source_of(points), window_seconds=WINDOW_S)
    (event,) = [e for e in result.events if e.trigger == "explicit"]
    assert event.top is not None and event.top.entity == f"{job.node_of(5)}|gpu|1"
    assert event.severity == "warning" and "unspecified launch failure" in event.summary


def test_steps_longer_than_the_hang_timeout_are_not_a_hang() -> None:
    """75 s steps: more than a minute between two steps is the job's pace, not a hang."""
    job = HookJob(nodes=3, ranks_per_node=2, step_s=75.0, steps=10, omit=())
    result = _run(job)
    assert [e.trigger for e in result.events] == []
