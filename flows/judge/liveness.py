"""A node of a running job that stops reporting is an event of its own: ``node_missing``.

Shards emit, per job and window, the job's members (``JobWindow.members``) and the nodes that
sent telemetry in that window (``JobWindow.alive_nodes``). :class:`LivenessTracker` takes the
union over a job's shards once per window and returns an :class:`ExplicitEvent` of kind
``node_missing`` (severity critical, component node) when a member has been silent for
``missing_after_windows`` consecutive windows: once per absence, not once per window, so one
lost node gives one event. When the node reports again it is armed again (and a later silence
is a new event). Only members count: a node that left the job is not missing.

A node counts as reporting whatever it sends: the agent's telemetry, training steps, events or
membership. Its patience follows its own cadence: a node that sends the agent's telemetry
(every window) is missing after ``missing_after_windows`` silent windows; one that sends only
what the training hook writes (a step every 47 s, membership every minute) after twice the
longest silence it has come back from, and at least twice ``hook_gap_windows`` before it has
shown one. A job whose nodes have no agent is not a job whose nodes are all missing.

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
    seen: bool = False
    hook_only: bool = False  # seen, but never with the agent's telemetry (every window)
    gap: int = 0  # the longest silence (windows) it came back from: its own cadence


@dataclass
class LivenessTracker:
    """Per job: which member nodes went silent. See the module docstring."""

    missing_after_windows: int = 3
    # Before a hook-only node has shown its cadence: the hook re-sends membership every 60 s.
    hook_gap_windows: int = 6
    max_gap_windows: int = 30  # a cadence longer than this is an outage, not a cadence
    _jobs: dict[str, dict[str, _NodeState]] = field(default_factory=dict)
    _gaps: dict[str, int] = field(default_factory=dict)  # job -> window its mass silence began

    def observe(
        self,
        job: str,
        window: int,
        end_ns: int,
        members: Iterable[str],
        alive: Iterable[str],
        steady: Iterable[str] | None = None,
    ) -> list[ExplicitEvent]:
        """One window of one job (all shards merged); returns the new node_missing events.
        ``steady``: the alive nodes that sent the agent's telemetry (default: all of them)."""
        member_set, alive_set = set(members), set(alive)
        steady_set = alive_set if steady is None else set(steady)
        nodes = self._jobs.setdefault(job, {})
        for gone in set(nodes) - member_set:
            del nodes[gone]  # left the job: not missing, and no state kept for it
        events: list[ExplicitEvent] = []
        overdue = []  # members silent for longer than their own cadence allows
        for node in sorted(member_set):
            state = nodes.setdefault(node, _NodeState())
            if node in alive_set:
                if not state.reported and state.silent_windows <= self.max_gap_windows:
                    state.gap = max(state.gap, state.silent_windows)
                # Hook-only until it sends the agent's telemetry once; then steady for good.
                state.hook_only = node not in steady_set and (state.hook_only or not state.seen)
                state.seen = True
                state.silent_windows, state.reported = 0, False
                continue
            state.silent_windows += 1
            if state.silent_windows >= self._patience(state):
                overdue.append(node)
        if member_set and len(overdue) > len(member_set) / 2:
            # Most of the job silent at once is one incident (a collection or ingestion gap,
            # a rack, or the one node still reporting has its clock far off), not many: one
            # finding for the job instead of a storm of one per node.
            if job not in self._gaps:
                self._gaps[job] = window
                meaning = (
                    f"{len(overdue)} of {len(member_set)} nodes of the job sent no telemetry "
                    "for longer than they ever had (collection gap, rack, or clock skew)"
                )
                # No node is named: which one would be a guess. A gap in telemetry, not a
                # hardware error: it raises a finding of its own, never a node's incident.
                event = self._event(job, "", end_ns, 0)
                events.append(
                    replace(event, kind="telemetry_gap", severity="info", meaning=meaning)
                )
            return events
        if self._gaps.pop(job, None) is not None:
            for node in overdue:  # still silent after the gap: judged afresh from now
                nodes[node].silent_windows, nodes[node].reported = 0, False
            return events
        for node in overdue:
            state = nodes[node]
            if not state.reported:
                state.reported = True
                events.append(self._event(job, node, end_ns, state.silent_windows))
        return events

    def _patience(self, state: _NodeState) -> int:
        if not state.hook_only:  # the agent's every-window cadence, or never seen at all
            return self.missing_after_windows
        return max(self.missing_after_windows, 2 * max(state.gap, self.hook_gap_windows))

    def observe_windows(self, parts: Iterable[JobWindow]) -> list[ExplicitEvent]:
        """The same, from the shards' JobWindows of one job and window."""
        parts = list(parts)
        if not parts:
            return []
        members = {member.node for part in parts for member in part.members}
        alive = {node for part in parts for node in part.alive_nodes}
        steady = {
            node
            for part in parts
            for node in (part.alive_nodes if part.agent_nodes is None else part.agent_nodes)
        }
        first = parts[0]
        end_ns = max(part.end_ns for part in parts)
        return self.observe(first.job, first.window, end_ns, members, alive, steady)

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
            index="-",  # a node-level entity, as every other (an empty tag cannot be written)
            severity="critical",
            meaning=MEANING.format(windows=windows),
            action=ACTION,
            job=job,
        )
