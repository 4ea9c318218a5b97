"""Membership is evidence, not gospel: an explicit error from a node in no known job is still
an event, a world size that contradicts the ranks reporting is flagged and outgrown, and a
GPU two jobs claim gives one event, not two. Each failed before."""

from __future__ import annotations

from hook_jobs import START_NS, WINDOW_S, HookJob, source_of, xid

from reflex_localize.flows.runner import run_in_process
from reflex_localize.schemas.codec import encode


def test_an_xid_from_a_node_in_no_known_job_is_still_an_event() -> None:
    job = HookJob(nodes=2, ranks_per_node=2, step_s=5.0, steps=40)
    points = [*job.points(), xid("node-07", 3, 79, START_NS + 100 * 10**9)]
    result = run_in_process(source_of(points), window_seconds=WINDOW_S)
    (event,) = result.events
    assert event.job == "-" and event.severity == "critical" and event.trigger == "explicit"
    assert event.top is not None and event.top.entity == "node-07|gpu|3"
    assert "no known job" in event.summary
    encode(event.to_point())  # it can be written
    again = [*points, xid("node-07", 3, 79, START_NS + 130 * 10**9)]
    assert len(run_in_process(source_of(again), window_seconds=WINDOW_S).events) == 1


def test_a_world_size_smaller_than_the_ranks_reporting_is_flagged_and_outgrown() -> None:
    slow = 37
    job = HookJob(
        nodes=8, ranks_per_node=8, step_s=8.0, steps=20, omit=(), declared_world_size=8,
        compute=lambda rank, step: 7.0 if rank == slow else 3.0 + 0.001 * rank,
    )  # fmt: skip
    result = run_in_process(source_of(job.points()), window_seconds=WINDOW_S)
    assert result.error_counts == {"membership_contradiction": 1}, result.error_counts
    (event,) = result.events
    assert event.trigger == "straggler" and event.top is not None
    assert event.top.entity == f"{job.node_of(slow)}|gpu|{slow % 8}"


def test_one_gpu_claimed_by_two_jobs_gives_one_event() -> None:
    stale = HookJob(nodes=2, ranks_per_node=2, step_s=5.0, steps=4, job="old", omit=())
    current = HookJob(nodes=2, ranks_per_node=2, step_s=5.0, steps=40, job="new", omit=())
    points = [
        *[p for p in stale.points() if p.measurement == "job_membership"],
        *current.points(),
        xid("node-01", 0, 79, START_NS + 120 * 10**9),
    ]
    result = run_in_process(source_of(points), window_seconds=WINDOW_S)
    explicit = [e for e in result.events if e.trigger == "explicit"]
    assert [(e.job, e.top.entity if e.top else None) for e in explicit] == [
        ("new", "node-01|gpu|0")
    ]
    # Each of the four GPUs both jobs claim (two nodes, two ranks each) is reported once.
    assert result.error_counts["membership_contradiction"] == 4
