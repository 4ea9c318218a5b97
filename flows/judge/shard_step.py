"""The per-shard step: validate, derive signals, judge each entity against its own history.

State per shard of nodes: longitudinal baselines, counter memory, which node runs which job.
Its output is routed by job, so that the job step sees all of a job's nodes together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from reflex_localize.flows.incidents.event_routing import Claims, double_claims, route_events
from reflex_localize.flows.incidents.explain import orphan_event
from reflex_localize.flows.incidents.node_memory import (
    DEVIATION_TROUBLE,
    STRAGGLE_TROUBLE,
    NodeMemory,
)
from reflex_localize.flows.judge.busy_clocks import BusyClocks, window_clocks
from reflex_localize.flows.judge.degraded_links import DegradedLinks
from reflex_localize.flows.judge.detectors import LongitudinalBaseline
from reflex_localize.flows.judge.event_points import explicit_events
from reflex_localize.flows.judge.site_wide import site_wide_signals
from reflex_localize.flows.messages import (
    ErrorRecord,
    ExplicitEvent,
    JobWindow,
    RankInfo,
    StepRows,
    WindowBatch,
)
from reflex_localize.flows.signals.derive import (
    SIGNAL_NAMES,
    SIGNALS,
    CounterMemory,
    derive,
    factorize,
)
from reflex_localize.flows.signals.gpu_identity import GpuIdentity
from reflex_localize.flows.signals.job_pause import WindowActivity
from reflex_localize.flows.signals.visible_gpus import node_gpu, renumbered
from reflex_localize.flows.signals.workload_state import Placement, entity_and_state, state_keys
from reflex_localize.flows.state_upgrade import FieldsFilledOnRestore
from reflex_localize.schemas.codec import Point
from reflex_localize.schemas.contract import load_schema
from reflex_localize.schemas.frame import Frame, validate_frame
from reflex_localize.schemas.site_tags import remember_sites
from reflex_localize.schemas.site_tags import site_tags as declared_site_tags

FLOORS = np.array([SIGNALS[name].floor for name in SIGNAL_NAMES])
DIRECTION = np.array([SIGNALS[name].direction for name in SIGNAL_NAMES], dtype=np.float64)


@dataclass
class ShardConfig:
    window_seconds: float = 10.0
    baseline_every: int = 30  # windows between reflex_baseline exports
    orphan_cooldown_s: float = 900.0  # one event per entity in no known job, per this long
    cluster: str = "sim"
    site_tags: tuple[str, ...] = field(
        default_factory=declared_site_tags
    )  # rack, switch, a site's own


@dataclass
class ShardState(FieldsFilledOnRestore):
    config: ShardConfig
    baseline: LongitudinalBaseline = field(
        default_factory=lambda: LongitudinalBaseline(len(SIGNAL_NAMES), FLOORS)
    )
    counters: CounterMemory = field(default_factory=CounterMemory)
    members: dict[str, dict[int, RankInfo]] = field(default_factory=dict)  # job -> rank -> info
    world_sizes: dict[str, int] = field(default_factory=dict)
    node_profile: dict[str, str] = field(default_factory=dict)
    gpu_claims: Claims = field(default_factory=dict)
    gpu_ids: GpuIdentity = field(default_factory=GpuIdentity)  # bus id -> GPU index, per node
    memory: NodeMemory = field(default_factory=NodeMemory)  # outlives jobs (recovery state)
    busy_clocks: BusyClocks = field(default_factory=BusyClocks)  # so does each GPU's clock
    degraded_links: DegradedLinks = field(default_factory=DegradedLinks)
    told: set[str] = field(default_factory=set)  # contradictions reported (once each)
    orphans_told: dict[str, int] = field(default_factory=dict)  # entity -> last event (ns)
    windows_seen: int = 0
    sites: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> site tag -> value
    # (job, rank) -> its device index and visible-device lists, while the lists renumber it.
    renumbered: dict[tuple[str, int], tuple[int, str, str]] = field(default_factory=dict)

    def on_batch(self, batch: WindowBatch) -> list[tuple[str, object]]:
        """Returns ``(route, item)`` pairs: route is a job name, "points" or "error"."""
        out: list[tuple[str, object]] = []
        frames = []
        carried = 0
        for frame in batch.frames:
            good, bad = validate_frame(frame, carry_tags=True)
            frames.append(good)
            if _has_foreign_tags(good, self.config.site_tags):
                carried += len(good)
            out.extend(
                ("error", ErrorRecord("validate", error.code, f"{error}; {point!r}"[:300]))
                for point, error in bad
            )
        by_measurement: dict[str, list[Frame]] = {}
        for frame in frames:
            by_measurement.setdefault(frame.measurement, []).append(frame)
        self.gpu_ids.learn(  # first: a rank's visible devices may name its GPU by UUID
            [f for m in ("gpu_info", "gpu_topology") for f in by_measurement.get(m, [])]
        )
        ended = self._learn_membership(by_measurement.get("job_membership", []))
        if self.renumbered:  # ranks whose GPU a UUID names: the GPU telemetry may carry it
            waiting = {info.node for job, rank in self.renumbered
                       if (info := self.members.get(job, {}).get(rank)) is not None}  # fmt: skip
            self.gpu_ids.learn_tagged_uuids(by_measurement.get("gpu", []), waiting)
            self._place_renumbered(batch.end_ns)
        remember_sites(frames, self.sites, self.config.site_tags)  # for the switch rule
        signals = derive(frames, self.config.window_seconds, self.counters)
        for entity, profile in zip(
            signals.entities.tolist(), signals.profiles.tolist(), strict=True
        ):
            if profile:
                self.node_profile[entity.split("|", 1)[0]] = profile
        activity = WindowActivity.of(by_measurement)  # idling and writing, for every job
        # A baseline per workload state: where jobs run, else what the GPUs did.
        keys = state_keys(signals.entities, activity, self._placement(activity))
        temporal = self.baseline.score_many(keys, signals.values)
        self.baseline.learn_many(keys, signals.values)
        scales = self.baseline.scale(self.baseline.rows(keys, create=True))
        self._remember_deviations(signals.entities, temporal, batch.end_ns)
        events = explicit_events(
            by_measurement.get("event", []), self.gpu_ids, self.memory, self.node_profile
        )
        jobs_on_node: dict[str, set[str]] = {}
        for job, ranks in self.members.items():
            for info in ranks.values():
                jobs_on_node.setdefault(info.node, set()).add(job)
        events += self.degraded_links.observe(
            signals.entities, signals.values, set(jobs_on_node), batch.end_ns
        )
        steps = _step_rows(by_measurement.get("train_step", []))
        self._remember_straggling(steps, batch.end_ns)
        alive = _reporting_nodes(frames)  # whatever families a node sends
        entity_nodes = np.array(
            [e.split("|", 1)[0] for e in signals.entities.tolist()], dtype=object
        )
        agent = set(entity_nodes.tolist())  # nodes that sent the agent's telemetry
        for job, clocks in window_clocks(jobs_on_node, signals.entities, signals.values).items():
            self.busy_clocks.observe(job, clocks)
        deviation = DIRECTION * temporal
        site_wide = site_wide_signals(signals.entities, deviation, jobs_on_node, self.sites)
        routed, orphans = route_events(events, jobs_on_node, self.gpu_claims)
        out += self._orphans(orphans, batch)
        out += self._contradictions()
        for job in sorted(set(self.members) | ended):
            nodes = {info.node for info in self.members.get(job, {}).values()}
            mine = np.isin(entity_nodes, list(nodes)) if nodes else np.zeros(0, bool)
            job_steps = steps.get(job, StepRows())
            out.append(
                (
                    job,
                    JobWindow(
                        job=job,
                        shard=batch.shard,
                        n_shards=batch.n_shards,
                        window=batch.window,
                        end_ns=batch.end_ns,
                        entities=signals.entities[mine] if nodes else signals.entities[:0],
                        values=signals.values[mine] if nodes else signals.values[:0],
                        temporal_z=temporal[mine] if nodes else temporal[:0],
                        scales=scales[mine] if nodes else scales[:0],
                        profiles=signals.profiles[mine] if nodes else signals.profiles[:0],
                        members=list(self.members.get(job, {}).values()),
                        events=routed.get(job, []),
                        steps=job_steps,
                        alive_nodes=sorted(alive & nodes),
                        agent_nodes=sorted(agent & nodes),
                        records=self.memory.of_nodes(nodes, batch.end_ns),
                        past_clocks=self.busy_clocks.of_nodes(nodes),
                        rails=self.gpu_ids.rails_of(nodes),
                        sites={n: dict(self.sites[n]) for n in nodes if n in self.sites},
                        world_size=self.world_sizes.get(job, 0),
                        active=job not in ended,
                        paused_s=activity.paused_s(
                            nodes, self.config.window_seconds, self._own_gpus(job)
                        ),
                        site_wide=site_wide,
                    ),
                )
            )
        for job in ended:
            self.members.pop(job, None)
        for job in [j for j in self.busy_clocks.current if j not in self.members]:
            self.busy_clocks.end(job)
        if carried:  # counted, not errors: exported beside the rejects
            counts = {("carried", "foreign_tag"): carried}
            points = reject_points(counts, self.config.cluster, batch.end_ns, batch.shard)
            out.append(("points", points))
        self.windows_seen += 1
        if self.windows_seen % self.config.baseline_every == 0:
            out.append(("points", self._baseline_points(batch.end_ns)))
            self.memory.forget_old(batch.end_ns)
            records = record_points(
                self.memory, self.config.cluster, batch.end_ns, self.busy_clocks.past
            )
            out.append(("points", records))
        return out

    def _remember_deviations(self, entities: np.ndarray, temporal: np.ndarray, now: int) -> None:
        """A GPU or NIC far off its own history while its node runs a job feeds its record (a
        host's phases do not: every checkpoint moves every host; nor does a node going idle
        between jobs, whose clocks and power drop far below their busy history)."""
        busy = {info.node for ranks in self.members.values() for info in ranks.values()}
        strong = np.nan_to_num(DIRECTION * temporal, nan=0.0) >= 6.0
        # A signal off on half or more of a node's parts of one kind at once is the node's
        # phase (a checkpoint, the job winding down), not one part's trouble.
        kinds = np.array([e.rsplit("|", 1)[0] for e in entities.tolist()], dtype=object)
        names, which = factorize(kinds)
        # Per kind, how many of its parts are off, a signal at a time (np.add.at is slow).
        share = np.zeros((len(names), strong.shape[1]))
        for column in np.flatnonzero(strong.any(axis=0)).tolist():
            share[:, column] = np.bincount(which, weights=strong[:, column], minlength=len(names))
        share /= np.bincount(which, minlength=len(names))[:, None]
        shared = (share >= 0.5) & (np.bincount(which, minlength=len(names)) >= 2)[:, None]
        strong &= ~shared[which]
        for row in np.flatnonzero(strong.any(axis=1)).tolist():
            entity = str(entities[row])
            if "|host|" in entity or entity.split("|", 1)[0] not in busy:
                continue
            signal = SIGNAL_NAMES[
                int(np.argmax(np.where(strong[row], DIRECTION * temporal[row], -np.inf)))
            ]
            self.memory.note(entity, DEVIATION_TROUBLE, now, signal)

    def _remember_straggling(self, steps: dict[str, StepRows], now: int) -> None:
        """A GPU computing 15% slower than the other GPUs of its node, in one job's window:
        what a shard can tell of straggling on its own, without the job's other nodes."""
        for job, rows in steps.items():
            ranks = self.members.get(job, {})
            known = np.isfinite(rows.compute)
            if not known.any() or not ranks:
                continue
            unique, inverse = np.unique(rows.rank[known], return_inverse=True)
            means = np.bincount(inverse, weights=rows.compute[known]) / np.bincount(inverse)
            per_node: dict[str, dict[int, float]] = {}
            for rank, mean in zip(unique.tolist(), means.tolist(), strict=True):
                info = ranks.get(int(rank))
                if info is not None and info.gpu >= 0:
                    per_node.setdefault(info.node, {})[info.gpu] = mean
            for node, gpus in per_node.items():
                if len(gpus) < 4:
                    continue
                level = float(np.median(list(gpus.values())))
                for gpu, mean in gpus.items():
                    if level > 0 and mean >= 1.15 * level:
                        self.memory.note(f"{node}|gpu|{gpu}", STRAGGLE_TROUBLE, now, "straggled")

    def _learn_membership(self, frames: list[Frame]) -> set[str]:
        """Learns which node runs which rank. A real training hook writes only what it knows:
        a field it left out gets a default (see :func:`rank_info`), never a KeyError."""
        ended: set[str] = set()
        for frame in frames:
            tags, fields = frame.tags, frame.fields
            active = fields.get("active", np.ones(len(frame), bool))
            for i in range(len(frame)):
                job, node, rank = str(tags["job"][i]), str(tags["node"][i]), int(tags["rank"][i])
                if not bool(active[i]):
                    ended.add(job)
                    continue
                ranks = self.members.setdefault(job, {})
                row = {k: v[i] for k, v in fields.items()}
                info = self._node_gpu(job, rank_info(rank, node, row), row)
                ranks[rank] = info
                if info.gpu >= 0:
                    self.gpu_claims.setdefault((node, info.gpu), {})[job] = int(frame.time_ns[i])
                world = fields.get("world_size")
                known = max(ranks) + 1
                self.world_sizes[job] = (
                    int(world[i]) if world is not None else max(known, self.world_sizes.get(job, 0))
                )
        for claimants in self.gpu_claims.values():
            for job in ended & set(claimants):
                del claimants[job]
        for key in [k for k in self.renumbered if k[0] in ended]:
            del self.renumbered[key]
        return {job for job in ended if job in self.members}

    def _placement(self, activity: WindowActivity) -> Placement:
        """Where the jobs of this shard's nodes run, and which of them write a checkpoint."""
        placement = Placement()
        for job, ranks in self.members.items():
            nodes = {info.node for info in ranks.values()}
            for info in ranks.values():
                gpus = placement.gpus.setdefault(info.node, set())
                if info.gpu >= 0:
                    gpus.add(str(info.gpu))
            paused = activity.paused_s(nodes, self.config.window_seconds, self._own_gpus(job))
            if paused:
                placement.checkpointing |= nodes
        return placement

    def _own_gpus(self, job: str) -> dict[str, set[str]]:
        """node -> the job's GPUs there, for the nodes where every rank's GPU is known: a job
        may share its node with another, or leave some GPUs of it unused."""
        own: dict[str, set[str]] = {}
        unknown: set[str] = set()
        for info in self.members.get(job, {}).values():
            if info.gpu < 0:
                unknown.add(info.node)
            else:
                own.setdefault(info.node, set()).add(str(info.gpu))
        return {node: gpus for node, gpus in own.items() if node not in unknown}

    def _node_gpu(self, job: str, info: RankInfo, fields: Mapping[str, object]) -> RankInfo:
        """The rank with its node's GPU index in place of its own device index, when its
        visible-device lists renumber its GPUs (:mod:`flows.visible_gpus`); unknown (-1) while
        they cannot tell, and kept to be placed once the node's GPU UUIDs are known."""
        cuda = str(fields.get("cuda_visible_devices") or "")
        nvidia = str(fields.get("nvidia_visible_devices") or "")
        if not renumbered(cuda, nvidia):
            return info
        gpu = node_gpu(info.gpu, cuda, nvidia, self.gpu_ids.uuids.get(info.node))
        if gpu is None:
            self.renumbered[(job, info.rank)] = (info.gpu, cuda, nvidia)
            return replace(info, gpu=-1)
        self.renumbered.pop((job, info.rank), None)
        return replace(info, gpu=gpu)

    def _place_renumbered(self, now_ns: int) -> None:
        """Ranks whose GPU their lists named by a UUID the node had not yet sent, placed once
        it has (the agent sends ``gpu_info`` at start, the hook its membership at any time)."""
        for (job, rank), (device, cuda, nvidia) in list(self.renumbered.items()):
            info = self.members.get(job, {}).get(rank)
            gpu = None if info is None else node_gpu(
                device, cuda, nvidia, self.gpu_ids.uuids.get(info.node)
            )  # fmt: skip
            if info is not None and gpu is not None:
                self.members[job][rank] = replace(info, gpu=gpu)
                self.gpu_claims.setdefault((info.node, gpu), {})[job] = now_ns
                del self.renumbered[(job, rank)]

    def _orphans(
        self, orphans: list[ExplicitEvent], batch: WindowBatch
    ) -> list[tuple[str, object]]:
        """Explicit errors from nodes in no known job: a critical one is an event of its own
        (job unknown, one per entity per cooldown), the rest are counted."""
        out: list[tuple[str, object]] = []
        for event in orphans:
            last = self.orphans_told.get(event.entity)
            if event.severity != "critical":
                detail = f"{event.node} {event.kind} {event.code}: {event.meaning}"[:300]
                out.append(("error", ErrorRecord("events", "event_outside_jobs", detail)))
            elif last is None or event.time_ns - last >= self.config.orphan_cooldown_s * 1e9:
                self.orphans_told[event.entity] = event.time_ns
                out.append(("event", orphan_event(event, self.config.cluster, batch.window)))
        return out

    def _contradictions(self) -> list[tuple[str, object]]:
        out: list[tuple[str, object]] = []
        for claim in double_claims(self.gpu_claims, set(self.members)):
            if claim not in self.told:
                self.told.add(claim)
                out.append(("error", ErrorRecord("membership", "membership_contradiction", claim)))
        return out

    def _baseline_points(self, time_ns: int) -> list[Point]:
        points = []
        b = self.baseline
        for key, row in b.index.items():
            entity, state = entity_and_state(key)
            node, component, index = entity.split("|")
            for j, signal in enumerate(SIGNAL_NAMES):
                if b.count[row, j] < b.warmup:
                    continue
                points.append(
                    Point(
                        "reflex_baseline",
                        {
                            "cluster": self.config.cluster,
                            "node": node,
                            "component": component,
                            "index": index,
                            "signal": signal,
                            "state": state,
                        },
                        {
                            "center": float(b.mean[row, j]),
                            "scale": float(np.sqrt(b.var[row, j])),
                            "count": int(b.count[row, j]),
                        },
                        time_ns,
                    )
                )
        return points


def _step_rows(frames: list[Frame]) -> dict[str, StepRows]:
    by_job: dict[str, StepRows] = {}
    for frame in frames:
        jobs = frame.tags["job"]
        for job in np.unique(jobs).tolist():
            mask = jobs == job
            f = frame.fields
            n = int(mask.sum())
            rows = StepRows(
                rank=frame.tags["rank"][mask].astype(np.int64),
                step=f["step"][mask].astype(np.int64) if "step" in f else np.zeros(n, np.int64),
                step_time=_col(f, "step_time_seconds", mask, n),
                compute=_col(f, "compute_seconds", mask, n),
                comm=_col(f, "comm_seconds", mask, n),
                time_ns=frame.time_ns[mask],
                checkpoint=_col(f, "checkpoint_seconds", mask, n),
                loss=_col(f, "loss", mask, n),
                node=frame.tags["node"][mask] if "node" in frame.tags else np.full(n, "", object),
            )
            previous = by_job.get(job)
            by_job[job] = rows if previous is None else _concat(previous, rows)
    return by_job


def _col(fields: dict[str, np.ndarray], name: str, mask: np.ndarray, n: int) -> np.ndarray:
    return fields[name][mask].astype(np.float64) if name in fields else np.full(n, np.nan)


def _concat(a: StepRows, b: StepRows) -> StepRows:
    return StepRows(
        *(
            np.concatenate([getattr(a, k), getattr(b, k)])
            for k in (
                "rank",
                "step",
                "step_time",
                "compute",
                "comm",
                "time_ns",
                "checkpoint",
                "loss",
                "node",
            )
        )
    )


def rank_info(rank: int, node: str, fields: dict[str, object]) -> RankInfo:
    """A rank's role from its membership fields; what a partial hook leaves out gets the
    neutral default: GPU unknown (-1), one pipeline stage, data-parallel rank = rank, and no
    hardware profile (generic limits, no hardware-specific signals)."""

    def number(name: str, default: int) -> int:
        value = fields.get(name)
        return default if value is None else int(value)  # type: ignore[call-overload]

    return RankInfo(
        rank,
        node,
        number("gpu", -1),
        number("dp_rank", rank),
        number("pp_rank", 0),
        number("tp_rank", 0),
        max(number("pp_size", 1), 1),
        str(fields.get("profile") or ""),
    )


def _reporting_nodes(frames: list[Frame]) -> set[str]:
    nodes: set[str] = set()
    for frame in frames:
        if len(frame) and "node" in frame.tags:
            # A set at C speed: np.unique would sort the strings, comparing them in Python.
            nodes.update(frame.tags["node"].tolist())
    return nodes


def record_points(
    memory: NodeMemory,
    cluster: str,
    time_ns: int,
    last_clocks: Mapping[str, tuple[float, str]] | None = None,
) -> list[Point]:
    """``reflex_record`` points: each part's record, as it stands now, and each GPU's clock
    in the last job it served (flows/judge/busy_clocks.py), which a drift event against that job
    quotes: an SRE checks the number beside the GPU's clocks in the next job."""
    clocks = last_clocks or {}
    points = []
    for entity in sorted(set(memory.records) | set(clocks)):
        node, component, index = entity.split("|")
        record = memory.records.get(entity)
        xids = record.xids if record is not None else {}
        fields: dict[str, float | str] = {
            "trouble": float(memory.trouble(entity, time_ns)),
            "reasons": memory.why(entity),
            "xids": ",".join(f"{code}x{len(times)}" for code, times in sorted(xids.items())),
        }
        if entity in clocks:
            fields["last_job_clock_mhz"], fields["last_job"] = clocks[entity]
        tags = {"cluster": cluster, "node": node, "component": component, "index": index}
        points.append(Point("reflex_record", tags, fields, time_ns))
    return points


def reject_points(
    counts: Mapping[tuple[str, str], int], cluster: str, time_ns: int, shard: str = ""
) -> list[Point]:
    """``reflex_rejects`` points: records per (where, reason code) in one window, tagged with
    the shard that counted them: shards count the same window and reason apart, and in
    InfluxDB one series would keep only the last shard's count."""
    tags = {"cluster": cluster, **({"shard": shard} if shard else {})}
    return [
        Point("reflex_rejects", {**tags, "where": where, "reason": reason},
              {"records": records}, time_ns)
        for (where, reason), records in sorted(counts.items())
    ]  # fmt: skip


def _has_foreign_tags(frame: Frame, site: tuple[str, ...] = ()) -> bool:
    declared = load_schema().measurements.get(frame.measurement)
    return declared is not None and bool(set(frame.tags) - set(declared.tags) - set(site))
