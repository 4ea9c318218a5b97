"""The simulation: a scenario, seeded, turned into time-ordered chunks of frames and truth.

Everything random is decided from the seed: the schedule (background, quirks, faults) once
at construction, the per-second noise per block of ``chunks(seconds)``. The same seed and
chunk length give identical frames. ``chunks(seconds, nodes=...)`` writes only some nodes'
rows (a flow process's shards), each identical to a full run's: every value is still drawn
for every entity, but no other node's row is laid out.

>>> from reflex_localize.simulator.scenario import load_scenario
>>> sim = Simulation(load_scenario("demo"), seed=7)
>>> chunk = next(iter(sim.chunks(seconds=10.0)))
>>> sorted({f.measurement for f in chunk})[:4]
['gpu', 'gpu_info', 'gpu_nvlink', 'host']
>>> [label.fault_type for label in sim.truth][:2]
['xid79', 'fail_slow_gpu']
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator.background import (
    Quirk,
    background_episodes,
    background_events,
    fleet_quirk_episodes,
    quirk_episodes,
    scheduled_benign,
)
from reflex_localize.simulator.cascade import JobIncident
from reflex_localize.simulator.cluster import ClusterSpec, build_cluster
from reflex_localize.simulator.deployment import AgentCoverage
from reflex_localize.simulator.effects import Episode, EpisodeIndex, block_state
from reflex_localize.simulator.events import EventLog, EventRecord, event_frames
from reflex_localize.simulator.faults import Context, FaultLabel, build_fault
from reflex_localize.simulator.gpu_telemetry import GpuTelemetry
from reflex_localize.simulator.host_telemetry import HostTelemetry
from reflex_localize.simulator.jobs import JobRuntime
from reflex_localize.simulator.mixture import mixture_faults
from reflex_localize.simulator.network_telemetry import NetworkTelemetry
from reflex_localize.simulator.scenario import Scenario
from reflex_localize.simulator.telemetry import BlockInput, kept_rows


class Simulation:
    """A seeded run of one scenario.

    >>> from reflex_localize.simulator.scenario import load_scenario
    >>> sim = Simulation(load_scenario("benign_quiet"), seed=1)
    >>> sim.truth[0].expect
    'no_hardware_fault'
    """

    def __init__(self, scenario: Scenario, seed: int = 0) -> None:
        self.scenario, self.seed = scenario, seed
        self.cluster: ClusterSpec = build_cluster(scenario)
        self.start_ns = scenario.start_ns
        self.duration_s = scenario.duration_s
        schedule = np.random.default_rng([seed, 1])
        episodes = background_episodes(scenario, self.cluster, schedule)
        quirk_eps, self.quirks = quirk_episodes(scenario, self.cluster, schedule)
        episodes += quirk_eps
        fleet_eps, fleet_quirks = fleet_quirk_episodes(scenario, self.cluster, schedule)
        episodes += fleet_eps
        self.quirks += fleet_quirks
        scheduled_eps, scheduled_events = scheduled_benign(scenario, self.cluster)
        episodes += scheduled_eps
        self.background_episodes = list(episodes)
        events: list[EventRecord] = background_events(scenario, self.cluster, schedule)
        events += scheduled_events
        incidents: list[JobIncident] = []
        self.truth: list[FaultLabel] = []
        ctx = Context(self.cluster, schedule, self.duration_s, self.start_ns, scenario.name)
        faults = list(scenario.faults) + mixture_faults(scenario, self.cluster, schedule)
        pieces: dict[str, list[FaultLabel]] = {}
        for number, config in enumerate(faults, 1):
            out = build_fault(config, number, ctx)
            episodes += out.episodes
            events += out.events
            incidents += out.incidents
            part_of = config.params.get("part_of")
            if out.label is not None and part_of is not None:
                pieces.setdefault(str(part_of), []).append(out.label)
            elif out.label is not None:
                self.truth.append(out.label)
        self.truth += [_compound_label(group) for group in pieces.values()]
        if not self.truth:
            self.truth.append(_no_fault_label(scenario))
        self.episodes = {lvl: EpisodeIndex([e for e in episodes if e.level == lvl])
                         for lvl in ("gpu", "host", "port", "nic")}  # fmt: skip
        self.events = EventLog(events)
        self.incidents = incidents
        profiles = [n.profile for n in self.cluster.nodes]
        self.jobs = [
            JobRuntime(
                job,
                incidents,
                self.cluster.name,
                self.start_ns,
                seed,
                [profiles[n] for n in job.rank_node],
            )
            for job in self.cluster.jobs
        ]
        self.coverage = AgentCoverage(self.cluster, scenario.agent_down)
        self.gpus = GpuTelemetry(
            self.cluster, seed, info=scenario.gpu_info, topology=scenario.gpu_topology
        )
        self.network = NetworkTelemetry(self.cluster, seed)
        self.host = HostTelemetry(self.cluster, disks=scenario.host_disk)
        self._started = False
        self._kept: frozenset[str] | None = None

    def chunks(
        self, seconds: float = 10.0, nodes: Callable[[str], bool] | None = None
    ) -> Iterator[list[Frame]]:
        """Frames of [t, t + seconds) for successive t, in simulated time order, of the nodes
        ``nodes`` keeps (all of them by default). One-shot."""
        if self._started:
            raise RuntimeError("a Simulation runs once; make a new one to replay it")
        self._started = True
        if nodes is not None:
            self._kept = frozenset(n.name for n in self.cluster.nodes if nodes(n.name))
        step = round(seconds)
        if step < 1 or abs(step - seconds) > 1e-9:
            raise ValueError(f"chunk length must be a whole number of seconds >= 1, not {seconds}")
        total = int(np.ceil(self.duration_s))
        for first in range(0, total, step):
            yield self._block(first, min(step, total - first))

    def _block(self, first_s: int, seconds: int) -> list[Frame]:
        rng = np.random.default_rng([self.seed, 2, first_s, seconds])
        nodes, gpus = len(self.cluster.nodes), self.cluster.gpu_count
        states = {
            level: block_state(self.episodes[level], level, first_s, seconds, count)
            for level, count in (("gpu", gpus), ("host", nodes), ("port", gpus), ("nic", nodes))
        }
        frames: list[Frame] = []
        util = np.zeros((seconds, gpus))
        traffic = np.zeros((seconds, gpus))
        allocated = np.zeros((seconds, gpus), dtype=bool)
        checkpointing = np.zeros((seconds, nodes))
        for job in self.jobs:
            frames += job.membership(first_s, seconds)
            frames += job.advance(
                first_s, seconds, states["gpu"], states["host"], states["port"], rng
            )
            u, t, a, ckpt = job.activity(first_s, seconds)
            # A node may serve two jobs in turn: each adds its activity, zero while it is gone.
            columns, hosts = job.job.rank_gpu, np.unique(job.job.rank_node)
            util[:, columns] = np.maximum(util[:, columns], u)
            traffic[:, columns] = np.maximum(traffic[:, columns], t)
            allocated[:, columns] |= a
            checkpointing[:, hosts] = np.maximum(checkpointing[:, hosts], ckpt[:, None])
        times = self.start_ns + (first_s + np.arange(seconds, dtype=np.int64)) * 1_000_000_000
        block = BlockInput(first_s, seconds, times, rng, states["gpu"], states["host"],
                           states["port"], states["nic"], util, traffic, allocated,
                           checkpointing, self._kept)  # fmt: skip
        telemetry: list[Frame] = []
        if first_s == 0:
            telemetry += kept_rows([self.gpus.info_frame(int(times[0]))], self._kept)
        telemetry += self.gpus.frames(block)
        telemetry += self.host.frames(block)
        telemetry += self.network.frames(block)
        end_ns = self.start_ns + (first_s + seconds) * 1_000_000_000
        start_ns = self.start_ns + first_s * 1_000_000_000
        events = event_frames(self.events.between(start_ns, end_ns), self.cluster.name,
                              start_ns, end_ns)  # fmt: skip
        # Events and the jobs' own rows (steps, membership) are few: cut after they are made,
        # each in its place in the chunk (as a run of every node lays it out).
        telemetry += kept_rows(events, self._kept)
        frames = kept_rows(frames, self._kept)
        return [f for f in self.coverage.visible(telemetry + frames) if len(f)]

    def write_truth(self, path: str | Path) -> None:
        """The label file: the scenario, the seed, the quirks (not faults) and each fault."""
        document = {
            "scenario": self.scenario.name,
            "seed": self.seed,
            "cluster": self.cluster.name,
            "start_ns": self.start_ns,
            "duration_s": self.duration_s,
            "nodes": len(self.cluster.nodes),
            "gpus": self.cluster.gpu_count,
            "quirks": [_quirk_dict(q) for q in self.quirks],
            "faults": [label.as_dict() for label in self.truth],
        }
        Path(path).write_text(json.dumps(document, indent=2) + "\n")


def _quirk_dict(quirk: Quirk) -> dict[str, str]:
    return {"kind": quirk.kind, "node": quirk.node, "index": quirk.index}


def _compound_label(pieces: list[FaultLabel]) -> FaultLabel:
    """One label for faults given the same ``part_of``: small anomalies on one node's parts
    that are one problem together (the node), each below anything alarming alone."""
    nodes, jobs = {p.node for p in pieces}, {p.job for p in pieces}
    if len(nodes) != 1 or len(jobs) != 1:
        raise ValueError(f"part_of groups faults of one node and job, not {sorted(nodes)}")
    first = min(pieces, key=lambda p: p.onset_ns)
    kinds = ", ".join(f"{p.fault_type} ({p.component} {p.index})".replace(" )", ")")
                      for p in pieces)  # fmt: skip
    return FaultLabel(
        fault_id=first.fault_id.rsplit("-", 1)[0] + "-node_compound",
        fault_type="node_compound",
        fault_class="implicit",
        node=first.node,
        component="node",
        index="",
        onset_ns=first.onset_ns,
        end_ns=max(p.end_ns for p in pieces),
        job=first.job,
        expect="hardware",
        description=f"individually benign anomalies on one node that add up: {kinds}",
    )


def _no_fault_label(scenario: Scenario) -> FaultLabel:
    end = scenario.start_ns + int(scenario.duration_s * 1e9)
    return FaultLabel(
        fault_id=f"{scenario.name}-000-none",
        fault_type="none",
        fault_class="none",
        node="",
        component="none",
        index="",
        onset_ns=scenario.start_ns,
        end_ns=end,
        job="",
        expect="no_hardware_fault",
        description="benign background only: no fault was injected",
    )


__all__ = ["Episode", "Simulation"]
