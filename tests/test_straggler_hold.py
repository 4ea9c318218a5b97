"""A straggler must hold its slowness for a while in wall time, not only for three steps.

The benign soak's seed 380 named a GPU falsely: two overlapping thermal throttles of a few
seconds on one GPU of a job with 2 s steps slowed its rank 16%, 22% and 26% for three steps
(6 s), and three steps with the last one 25% over were a straggler. Three 8 s or 25 s steps
already span 16 s or more, so those jobs are told as before."""

from __future__ import annotations

from reflex_localize.flows.judge.step_peers import StepFinding, StepPeers
from reflex_localize.flows.messages import RankInfo


def _members() -> dict[int, RankInfo]:
    return {r: RankInfo(r, f"n{r // 2}", r % 2, r // 4, 0, 0, 1, "a100") for r in range(16)}


def _stragglers(
    slow: list[float], step_s: float, quick: set[int] | None = None
) -> list[StepFinding]:
    """Rank 5 computes ``slow[i]`` times what its peers do in step i; steps of ``step_s``."""
    members = _members()
    peers = StepPeers(quick=quick or set())
    found: list[StepFinding] = []
    for step, ratio in enumerate(slow):
        # Peers' jitter of a few tenths of a percent, so the job's spread is the floor's.
        compute = {r: step_s * (ratio if r == 5 else 1.0 + 0.003 * (r % 3)) for r in members}
        peers.add_step(step, compute, int((step + 1) * step_s * 1e9))
        found += [f for f in peers.judge(members) if f.kind == "straggler"]
    return found


# Seed 380's shape: normal, three steps 16-26% slow, normal again.
THROTTLE_BLIP = [1.0] * 5 + [1.16, 1.22, 1.26] + [1.13, 1.04] + [1.0] * 10


def test_a_few_seconds_of_throttle_in_a_job_of_short_steps_is_no_straggler() -> None:
    assert _stragglers(THROTTLE_BLIP, step_s=2.0) == []


def test_the_same_three_steps_in_a_job_of_8_s_steps_are_a_straggler() -> None:
    [finding] = _stragglers(THROTTLE_BLIP, step_s=8.0)
    assert (finding.rank, finding.steps) == (5, 3)


def test_a_slowdown_that_holds_in_a_job_of_short_steps_is_told_after_15_s() -> None:
    [finding] = _stragglers([1.0] * 5 + [1.3] * 20, step_s=2.0)
    # The streak's first step ends at 12 s; 15 s later is the 9th slow step.
    assert (finding.rank, finding.steps) == (5, 9)


def test_a_part_with_a_record_keeps_its_lowered_bar() -> None:
    [finding] = _stragglers(THROTTLE_BLIP, step_s=2.0, quick={5})
    assert (finding.rank, finding.steps) == (5, 2)
