"""A node of a running job that stops reporting is an event of its own: ``node_missing``.

Shards emit, per job and window, the job's members (``JobWindow.members``) and the nodes that
sent telemetry in that window (``JobWindow.alive_nodes``). :class:`LivenessTracker` takes the
union over a job's shards once per window and returns an :class:`ExplicitEvent` of kind
``node_missing`` (severity critical, component node) when a member has been silent for
``missing_after_windows`` consecutive windows: once per absence, not once per window, so one
lost node gives one event. When the node reports again it is armed again (and a later silence
is a new event). Only members count: a node that left the job is not missing.

The state is a few ints per member node: it pickles (Bytewax snapshots) and stays bounded,
because nodes that are no longer members are forgotten.

>>> tracker = LivenessTracker(missing_after_windows=2)
>>> members, end = {"n1", "n2"}, 10**18
>>> tracker.observe("job", 0, end, members, alive={"n1", "n2"})
[]
>>> tracker.observe("job", 1, end + 10, members, alive={"n1"})
[]
>>> [(e.node, e.kind) for e in tracker.observe("job", 2, end + 20, members, alive={"n1"})]
[('n2', 'node_missing')]
>>> tracker.observe("job", 3, end + 30, members, alive={"n1"})  # one absence, one event
[]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from reflex_localize.flows.messages import ExplicitEvent, JobWindow

MEANING = "node sent no telemetry for {windows} windows while its job runs"
ACTION = "check the node is up and its agent runs; drain it if it is down"


@dataclass
class _NodeState:
    silent_windows: int = 0
    reported: bool = False  # a node_missing event for the current absence went out


@dataclass
class LivenessTracker:
    """Per job: which member nodes went silent. See the module docstring."""

    missing_after_windows: int = 3
    _jobs: dict[str, dict[str, _NodeState]] = field(default_factory=dict)
    _gaps: dict[str, int] = field(default_factory=dict)  # job -> windows of mass silence

    def observe(
        self,
        job: str,
        window: int,
        end_ns: int,
        members: Iterable[str],
        alive: Iterable[str],
    ) -> list[ExplicitEvent]:
        """One window of one job (all shards merged); returns the new node_missing events."""
        member_set, alive_set = set(members), set(alive)
        nodes = self._jobs.setdefault(job, {})
        for gone in set(nodes) - member_set:
            del nodes[gone]  # left the job: not missing, and no state kept for it
        events: list[ExplicitEvent] = []
        silent = sorted(member_set - alive_set)
        if member_set and len(silent) > len(member_set) / 2:
            # Most of the job silent at once is one incident (a collection or ingestion gap,
            # a rack, or the one node still reporting has its clock far off), not many: one
            # event for the job instead of a storm of one per node.
            gap = self._gaps.setdefault(job, 0) + 1
            self._gaps[job] = gap
            if gap == self.missing_after_windows:
                meaning = (
                    f"{len(silent)} of {len(member_set)} nodes of the job sent no "
                    f"telemetry for {gap} windows (collection gap, rack, or clock skew)"
                )
                events.append(replace(self._event(job, silent[0], end_ns, gap), meaning=meaning))
            return events
        self._gaps.pop(job, None)
        for node in sorted(member_set):
            state = nodes.setdefault(node, _NodeState())
            if node in alive_set:
                state.silent_windows, state.reported = 0, False
                continue
            state.silent_windows += 1
            if state.silent_windows >= self.missing_after_windows and not state.reported:
                state.reported = True
                events.append(self._event(job, node, end_ns, state.silent_windows))
        return events

    def observe_windows(self, parts: Iterable[JobWindow]) -> list[ExplicitEvent]:
        """The same, from the shards' JobWindows of one job and window."""
        parts = list(parts)
        if not parts:
            return []
        members = {member.node for part in parts for member in part.members}
        alive = {node for part in parts for node in part.alive_nodes}
        first = parts[0]
        end_ns = max(part.end_ns for part in parts)
        return self.observe(first.job, first.window, end_ns, members, alive)

    def forget_job(self, job: str) -> None:
        """The job ended: drop its state."""
        self._jobs.pop(job, None)
        self._gaps.pop(job, None)

    @staticmethod
    def _event(job: str, node: str, end_ns: int, windows: int) -> ExplicitEvent:
        return ExplicitEvent(
            time_ns=end_ns,
            node=node,
            kind="node_missing",
            code=0,
            component="node",
            index="",
            severity="critical",
            meaning=MEANING.format(windows=windows),
            action=ACTION,
            job=job,
        )
