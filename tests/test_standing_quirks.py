"""A part whose evidence stood long before a job slowed did not slow it: late in a long run, a
noisy port's piled-up score must not outrank a GPU whose state changed when the job slowed.
Both still rank; the part that changed leads the regression."""

from __future__ import annotations

from reflex_localize.flows.incidents.events import Evidence, Suspect
from reflex_localize.flows.judge.job_fields import JobConfig
from reflex_localize.flows.judge.job_step import JobState
from reflex_localize.flows.judge.job_suspects import STANDING_S

ONSET_NS = 7_200 * 10**9  # the job slowed two hours in


def _suspect(entity: str, score: float, since_s: float) -> Suspect:
    node, component, index = entity.split("|")
    return Suspect(
        node, component, index, score, [Evidence("x", 4.0, 4.0, 1.0, int(since_s * 1e9))]
    )


def test_the_part_that_changed_leads_and_the_standing_one_follows() -> None:
    job = JobState("j", JobConfig())
    job.slowdown_onset_ns = ONSET_NS
    port = _suspect("n1|nic|mlx5_3/1", 12.0, 600.0)  # erring since the job's tenth minute
    gpu = _suspect("n4|gpu|2", 5.0, ONSET_NS / 1e9 - 30)  # slower since just before
    assert job._changed_first([port, gpu]) == [gpu, port]


def test_evidence_that_began_within_the_standing_span_counts_as_a_change() -> None:
    job = JobState("j", JobConfig())
    job.slowdown_onset_ns = ONSET_NS
    early = _suspect("n4|gpu|2", 5.0, ONSET_NS / 1e9 - STANDING_S / 2)
    port = _suspect("n1|nic|mlx5_3/1", 12.0, 600.0)
    assert job._changed_first([early, port])[0] is early


def test_without_a_slowdown_the_ranking_is_the_scores() -> None:
    job = JobState("j", JobConfig())
    port, gpu = _suspect("n1|nic|mlx5_3/1", 12.0, 600.0), _suspect("n4|gpu|2", 5.0, 7_000.0)
    assert job._changed_first([port, gpu]) == [port, gpu]
