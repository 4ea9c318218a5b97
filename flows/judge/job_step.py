"""The per-job step: peers, compound score, triggers and localization events.

Windows from every shard that runs part of the job are gathered first, then processed in
window order, so that one process or many produce the same events.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np

from reflex_localize.flows.impact.model import impact_rows
from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.judge.explained_straggler import learned_slowing
from reflex_localize.flows.judge.job_evidence import rank_entity
from reflex_localize.flows.judge.job_fields import (
    MODES,
    RECENT_WINDOWS,
    JobConfig,
    checkpointing,
    default_weights,
)
from reflex_localize.flows.judge.job_triggers import JobTriggers
from reflex_localize.flows.judge.node_evidence import RECORD_MATTERS
from reflex_localize.flows.judge.rank_placement import placed_rows
from reflex_localize.flows.judge.thresholds import threshold_events
from reflex_localize.flows.messages import ErrorRecord, JobWindow, infer_gpus, shard_of
from reflex_localize.flows.signals.derive import SIGNAL_NAMES
from reflex_localize.schemas.codec import Point

__all__ = ["MODES", "JobConfig", "JobState", "default_weights"]

ALARM_EXPORT_WINDOWS = 30  # windows between exports of a job's alarm bars and rates


@dataclass
class JobState(JobTriggers):
    """One job's step: windows gathered from its shards, then judged in window order."""

    def on_window(self, part: JobWindow) -> list[tuple[str, object]]:
        self.job = self.job or part.job  # Bytewax builds state without the key
        if part.window <= self.last_done:
            # The window was processed without this shard (it stayed silent too long):
            # counted and reported, never merged into a closed window.
            return [
                (
                    "error",
                    ErrorRecord(
                        "job_step",
                        "shard_window_late",
                        f"{part.job} window {part.window} {part.shard}: arrived after the "
                        "window was processed without it",
                    ),
                )
            ]
        self.pending.setdefault(part.window, {})[part.shard] = part
        self.sites.update(part.sites)
        self.n_shards = part.n_shards
        for info in part.members:
            self.members[info.rank] = info
        self.members = infer_gpus(self.members)
        out: list[tuple[str, object]] = self._check_world_size(part.world_size)
        while self.pending:
            window = min(self.pending)
            ready = self._complete(self.pending[window])
            limit = self.config.max_pending_windows
            if not ready and (limit <= 0 or len(self.pending) < limit):
                break
            out.extend(self._process(window, list(self.pending.pop(window).values())))
        return out

    def _check_world_size(self, declared: int) -> list[tuple[str, object]]:
        """Membership may say fewer ranks than report (a stale or mistyped world size): the
        job goes on with the ranks it sees, and the contradiction is reported once."""
        seen = max(self.members, default=-1) + 1
        self.world_size = max(self.world_size, declared, seen)
        if declared <= 0 or seen <= declared or self.world_size_told:
            return []
        self.world_size_told = True
        detail = f"{self.job}: membership says world size {declared}, ranks up to {seen - 1} report"
        return [("error", ErrorRecord("job_step", "membership_contradiction", detail))]

    def on_eof(self) -> list[tuple[str, object]]:
        out: list[tuple[str, object]] = []
        for window in sorted(self.pending):
            out.extend(self._process(window, list(self.pending.pop(window).values())))
        return out

    def _complete(self, parts: dict[str, JobWindow]) -> bool:
        """Every rank is known, and every shard that runs one has sent this window. The
        expected shards come from membership, not from arrivals, so that one process or many
        process the same windows with the same data."""
        if self.world_size <= 0 or len(self.members) < self.world_size:
            return False
        expected = {f"shard-{shard_of(info.node, self.n_shards)}" for info in self.members.values()}
        return expected <= set(parts)

    def _process(self, window: int, parts: list[JobWindow]) -> list[tuple[str, object]]:
        self.last_done = window
        parts.sort(key=lambda p: p.shard)
        refused: list[tuple[str, object]] = []
        claims = [info for part in parts for info in part.members]
        for i, part in enumerate(parts):
            steps, errors = placed_rows(self.job, part.steps, claims or self.members.values())
            if errors:
                parts[i] = replace(part, steps=steps)
                refused.extend(("error", error) for error in errors)
        end_ns = max(p.end_ns for p in parts)
        entities = np.concatenate([p.entities for p in parts])
        values = (
            np.vstack([p.values for p in parts])
            if len(entities)
            else np.zeros((0, len(SIGNAL_NAMES)))
        )
        temporal = np.vstack([p.temporal_z for p in parts]) if len(entities) else values
        scales = np.vstack([p.scales for p in parts]) if len(entities) else values
        profiles = np.concatenate([p.profiles for p in parts])
        # A member node that went silent is an explicit event of its own (node_missing).
        missing = self.liveness.observe_windows(parts)
        events = sorted(
            [*(e for p in parts for e in p.events), *missing], key=lambda e: (e.time_ns, e.node)
        )
        if self.config.mode == "threshold":
            return threshold_events(
                self.job,
                self.config.cluster,
                self.config.cooldown_s,
                self.alerted,
                window,
                end_ns,
                entities,
                values,
                profiles,
                events,
            )
        totals: dict[str, float] = {}
        self.book.features = {}
        self.book.signals(
            entities,
            values,
            temporal,
            scales,
            profiles,
            self.members,
            self.config.mode,
            self._weights,
            end_ns,
            totals,
            checkpointing=checkpointing(parts),
            slowing=learned_slowing(self._learned()),
            rails={gpu: nic for p in parts for gpu, nic in p.rails.items()},
            sites=self.sites,
            site_wide=sorted({signal for p in parts for signal in p.site_wide}),
        )
        self._past_clocks(parts)
        self._observe_clocks(entities, values)
        self.book.stragglers(parts, self.members, self._weights, end_ns, totals)
        corrected: dict[str, float] = {}
        self.book.explicit(events, totals, corrected)
        self.book.back_pressure(totals, end_ns, corrected)
        if self.config.impact_recorder is not None:
            rows = impact_rows(parts, self.members, self.book.features)
            self.config.impact_recorder(self.job, end_ns, rows)
        if (model := self._learned()) is not None:
            self.book.impact(totals, model, end_ns)
        if self.config.mode == "reflex":
            self.book.history(totals, self._history(parts), end_ns)
        self.book.node_compound(totals, end_ns, corrected)
        for entity, amount in totals.items():
            if amount > 0:
                self.last_evidence[entity] = window
        self.fresh = {e for e, w in self.last_evidence.items() if window - w <= RECENT_WINDOWS}
        self.last_evidence = {e: self.last_evidence[e] for e in self.fresh}
        told_fresh = bool(self.last_event_entities & self.fresh)
        if told_fresh or self._told_ranks_slow():
            quiet = end_ns - self.incident_active_ns
            if told_fresh and quiet > 1.5 * self.config.window_seconds * 1e9:  # a new run
                self.incident_gap_ns = quiet
            self.incident_active_ns = end_ns
        if self.config.recorder is not None:
            self.config.recorder(self.job, end_ns, self.book.features)
        keys = np.array(sorted(totals), dtype=object)
        self.compound.update(keys, np.array([totals[k] for k in keys.tolist()]))
        keys = np.array(sorted(corrected), dtype=object)
        self.corrected.update(keys, np.array([corrected[k] for k in keys.tolist()]))
        if self.config.mode == "reflex":
            self._observe_scores(entities)
        out: list[tuple[str, object]] = [*refused, ("points", self._score_points(end_ns))]
        self.recent_events = [
            e for e in self.recent_events + events if e.time_ns >= end_ns - 300 * 10**9
        ]
        told = self._triggered(window, end_ns, parts, events)
        out.extend(("event", event) for event in told)
        self._count_alarms(told)
        if parts:
            # A job name may come back (a requeued job keeps its id): only its last window's
            # parts say whether it has ended.
            self.finished = not any(p.active for p in parts)
            if self.finished:
                self.liveness.forget_job(self.job)
        if self.finished or window % ALARM_EXPORT_WINDOWS == 0:
            out.append(("points", self._alarm_points(end_ns)))
        return out

    def _told_ranks_slow(self) -> bool:
        """A rank on a node the open incident named is slower than its peers this step: the
        incident goes on, whatever its parts' telemetry shows (ranks of a node that straggle
        together stand out less when they are half their stage's peers)."""
        nodes = {self.members[r].node for r in self.step_peers.streak if r in self.members}
        return bool(nodes & self.last_event_nodes)

    def _count_alarms(self, told: list[LocalizationEvent]) -> None:
        """The window's node-seconds judged, and its hardware-blaming events by trigger."""
        self.node_seconds += self.node_count * self.config.window_seconds
        for event in told:
            if event.top is not None and event.top.component not in ("", "none"):
                self.raised[event.trigger] = self.raised.get(event.trigger, 0) + 1

    def _alarm_points(self, end_ns: int) -> list[Point]:
        """The bars the budget holds the triggers to, and the realized alarm rate by trigger:
        what a fleet considers normal, and whether the budget holds on it."""
        tags = {"cluster": self.config.cluster, "job": self.job}
        points = []
        for statistic, tail in sorted(self.budget.tails.items()):
            if statistic == "straggler":
                prior, bar = self.step_peers.min_excess, self.step_peers.learned_excess
            else:
                prior = self.config.min_suspect_score
                bar = self._bar(statistic.split("|", 1)[1])
            fields = {"bar": float(max(bar, prior)), "prior": float(prior), "samples": tail.samples}
            points.append(
                Point("reflex_alarm_bar", {**tags, "statistic": statistic}, fields, end_ns)
            )
        hours = self.node_seconds / 3600
        raised = {"all": sum(self.raised.values()), **self.raised}  # "all": every trigger
        for trigger, count in sorted(raised.items()):
            rate = 1000 * count / hours if hours > 0 else 0.0
            fields = {"events": count, "node_hours": hours, "rate_per_1k_node_hours": rate}
            points.append(Point("reflex_alarm_rate", {**tags, "trigger": trigger}, fields, end_ns))
        return points

    def retired(self) -> JobState:
        """What is kept of the job once it ended with nothing pending: its name and its last
        window, so that a shard's part arriving after the end is reported late rather than
        taken for a new job. Its peers, baselines and evidence (about 2 KB a rank) go: the flow
        outlives thousands of jobs, and every snapshot would carry them. A job that comes back
        under the same name starts afresh, as it runs on other nodes, from its first step."""
        return JobState(
            self.job, self.config, n_shards=self.n_shards, last_done=self.last_done, finished=True
        )

    def _history(self, parts: list[JobWindow]) -> dict[str, tuple[float, str]]:
        """The records of the job's parts, taken once, at the job's first window: a record
        this job's own fault feeds must not weigh that fault's evidence again."""
        if self.history is None:
            self.history = {e: r for p in parts for e, r in p.records.items()}
            known = {e for e, (trouble, _) in self.history.items() if trouble >= RECORD_MATTERS}
            self.step_peers.quick = {
                rank for rank, info in self.members.items() if rank_entity(info) in known
            }
        return self.history

    def _score_points(self, end_ns: int) -> list[Point]:
        points = []
        for entity, score in sorted(self.compound.scores.items()):
            if score < self.config.score_export_min:
                continue
            node, component, index = entity.split("|")
            notes = self.book.notes(entity)
            points.append(
                Point(
                    "reflex_score",
                    {
                        "cluster": self.config.cluster,
                        "node": node,
                        "component": component,
                        "index": index,
                    },
                    {
                        "score": float(score),
                        "top_signal": notes[0].signal if notes else "",
                        "evidence": json.dumps({e.signal: round(e.weight, 3) for e in notes[:5]}),
                        "job": self.job,
                    },
                    end_ns,
                )
            )
        return points
