"""A part that failed in an earlier job, slowing its rank again: told on its own evidence.

An intermittent part moves from job to job, and the faults that end a job are the ones that
recur (Meta's "lemon nodes", Kokolis et al., HPCA 2025; fail-slows come and go, FALCON, Wu et
al., 2024). Its next episode may be short and mild: a GPU's clock 8% low for 75 s, its rank
6% slower for three steps, the job a couple of percent slower. That is under what a job's
regression reacts to, and nine steps of a marginal rank (flows/judge/explained_straggler.py) never
come. The node's record (flows/incidents/node_memory.py) changes the question: not "is this a fault
or a quirk?" but "is the part that failed before doing it again?".

So a rank on a GPU that came to the job with a record is told when, over its latest few
steps, it runs marginally slower than its peers and its part shows a slowing state (a low
clock, a throttle, low power) off its own history, held since before the streak's second
half. Both conditions matter: a binned GPU's low clock is no departure from its own history,
and a departure without a slower rank costs the job nothing. Without a record the same blip
waits for the job's own symptom.

>>> from reflex_localize.flows.incidents.events import Evidence
>>> from reflex_localize.flows.messages import RankInfo
>>> from reflex_localize.flows.judge.step_peers import StepFinding
>>> s = 10**9
>>> members = {3: RankInfo(3, "n2", 3, 0, 3, 0, 1, "h100")}
>>> slow = [StepFinding("marginal", 3, 1.07, steps=3, since_ns=20 * s)]
>>> notes = {"n2|gpu|3": [Evidence("sm_clock_low", -6.2, -6.3, 1.3, 10 * s)]}
>>> found = returning_part(slow, members, notes.get, end_ns=80 * s, window_ns=10 * s)
>>> found.entity, found.note.signal
('n2|gpu|3', 'sm_clock_low')
>>> late = {"n2|gpu|3": [Evidence("sm_clock_low", -6.2, -6.3, 1.3, 70 * s)]}
>>> returning_part(slow, members, late.get, end_ns=80 * s, window_ns=10 * s) is None
True
>>> binned = {"n2|gpu|3": [Evidence("sm_clock_low", -0.4, -6.3, 1.3, 10 * s)]}
>>> returning_part(slow, members, binned.get, end_ns=80 * s, window_ns=10 * s) is None
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reflex_localize.flows.incidents.events import Evidence
from reflex_localize.flows.judge.explained_straggler import MIN_HELD_WINDOWS
from reflex_localize.flows.judge.job_evidence import rank_entity
from reflex_localize.flows.judge.step_peers import StepFinding
from reflex_localize.flows.messages import RankInfo

# GPU states that make a rank compute slower, read against the part's own history here (so
# its speed counts: a low clock is news on a part whose clock was not low before).
RETURNING_SIGNALS = ("throttle_", "sm_clock_low", "power_low", "memory_clock_low")
OWN_DEPARTS = 3.0  # spreads off its own history (a binned part's clock stands near 0)


@dataclass(frozen=True)
class Returning:
    finding: StepFinding  # the rank's marginal streak
    entity: str  # its part, which came to the job with a record
    note: Evidence  # the part's state off its own history


def returning_part(
    known: list[StepFinding],
    members: dict[int, RankInfo],
    notes_of: Callable[[str], list[Evidence] | None],
    end_ns: int,
    window_ns: float,
) -> Returning | None:
    """The slowest rank of ``known`` (ranks on parts with a record, marginally slow over their
    latest steps) whose part shows a slowing state off its own history, held long enough; or
    None."""
    best: tuple[float, Returning] | None = None
    for finding in known:
        info = members.get(finding.rank)
        if info is None:
            continue
        entity = rank_entity(info)
        held_by = end_ns - max(MIN_HELD_WINDOWS * window_ns, (end_ns - finding.since_ns) / 2)
        own = [
            note
            for note in notes_of(entity) or []
            if note.signal.startswith(RETURNING_SIGNALS)
            and abs(note.temporal_z or 0.0) >= OWN_DEPARTS
            and note.since_ns <= held_by
        ]
        if not own:
            continue
        note = max(own, key=lambda n: abs(n.temporal_z or 0.0))
        if best is None or finding.ratio > best[0]:
            best = (finding.ratio, Returning(finding, entity, note))
    return None if best is None else best[1]
