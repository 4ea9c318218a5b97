"""The simulation: a scenario, seeded, turned into time-ordered chunks of frames and truth.

Everything random is decided from the seed: the schedule (background, quirks, faults) once
at construction, the per-second noise per block of ``chunks(seconds)``. The same seed and
chunk length give identical frames.

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
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator.background import (
    Quirk,
    background_episodes,
    background_events,
    quirk_episodes,
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
from reflex_localize.simulator.telemetry import BlockInput


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
        self.background_episodes = list(episodes)
        events: list[EventRecord] = background_events(scenario, self.cluster, schedule)
        incidents: list[JobIncident] = []
        self.truth: list[FaultLabel] = []
        ctx = Context(self.cluster, schedule, self.duration_s, self.start_ns, scenario.name)
        faults = list(scenario.faults) + mixture_faults(scenario, self.cluster, schedule)
        for number, config in enumerate(faults, 1):
            out = build_fault(config, number, ctx)
            episodes += out.episodes
            events += out.events
            incidents += out.incidents
            if out.label is not None:
                self.truth.append(out.label)
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
        self.gpus = GpuTelemetry(self.cluster, seed)
        self.network = NetworkTelemetry(self.cluster, seed)
        self.host = HostTelemetry(self.cluster)
        self._started = False

    def chunks(self, seconds: float = 10.0) -> Iterator[list[Frame]]:
        """Frames of [t, t + seconds) for successive t, in simulated time order. One-shot."""
        if self._started:
            raise RuntimeError("a Simulation runs once; make a new one to replay it")
        self._started = True
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
            columns = job.job.rank_gpu
            util[:, columns], traffic[:, columns], allocated[:, columns] = u, t, a
            checkpointing[:, np.unique(job.job.rank_node)] = ckpt[:, None]
        times = self.start_ns + (first_s + np.arange(seconds, dtype=np.int64)) * 1_000_000_000
        block = BlockInput(first_s, seconds, times, rng, states["gpu"], states["host"],
                           states["port"], states["nic"], util, traffic, allocated,
                           checkpointing)  # fmt: skip
        telemetry: list[Frame] = []
        if first_s == 0:
            telemetry.append(self.gpus.info_frame(int(times[0])))
        telemetry += self.gpus.frames(block)
        telemetry += self.host.frames(block)
        telemetry += self.network.frames(block)
        end_ns = self.start_ns + (first_s + seconds) * 1_000_000_000
        start_ns = self.start_ns + first_s * 1_000_000_000
        telemetry += event_frames(self.events.between(start_ns, end_ns), self.cluster.name,
                                  start_ns, end_ns)  # fmt: skip
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
