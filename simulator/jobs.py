"""Synchronous training: per-rank step times, what the job's GPUs and links are doing,
and its membership records.

Each step, every rank computes (slowed by its GPU and host) and communicates (slowed by its
links); the step ends when the slowest rank is done, so every other rank shows the
difference as communication wait. The last pipeline stage is legitimately slower, sequence
lengths make replicas noisy, and checkpoints pause everyone. None of that is a fault.

>>> import numpy as np
>>> from reflex_localize.simulator.scenario import load_scenario
>>> from reflex_localize.simulator.cluster import build_cluster
>>> from reflex_localize.simulator.effects import BlockState
>>> cluster = build_cluster(load_scenario("demo"))
>>> job = JobRuntime(cluster.jobs[0], [], "sim", 0, seed=1)
>>> gpu, host, port = BlockState(10, 256), BlockState(10, 32), BlockState(10, 256)
>>> frames = job.advance(0, 10, gpu, host, port, np.random.default_rng(0))
>>> steps = frames[0].fields["step"]
>>> len(np.unique(steps)) >= 5
True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator.cascade import JobIncident
from reflex_localize.simulator.cluster import JobSpec, node_name
from reflex_localize.simulator.effects import BlockState
from reflex_localize.simulator.telemetry import tag

MEMBERSHIP_EVERY_S = 60.0
TOKENS_PER_RANK_STEP = 32768.0
CHECKPOINT_UTIL, SPIN_UTIL, TRAIN_UTIL = 0.05, 1.0, 0.96


class JobRuntime:
    """One job as it runs: the step clock, pending step rows, checkpoint windows."""

    def __init__(
        self,
        job: JobSpec,
        incidents: Sequence[JobIncident],
        cluster: str,
        start_ns: int,
        seed: int,
        profiles: Sequence[str] = (),
    ) -> None:
        rng = np.random.default_rng([seed, 303, *job.name.encode()])
        self.job, self.cluster, self.start_ns = job, cluster, start_ns
        self.incidents = [i for i in incidents if i.job == job.name]
        stops = [i for i in self.incidents if i.kind in ("crash", "hang")]
        first = min(stops, key=lambda i: i.time_s) if stops else None
        self.cut_s = first.time_s if first else np.inf  # no step completes after this
        self.gone_s = min(first.stop_s, job.end_s) if first else job.end_s
        self.hang = first if first and first.kind == "hang" else None
        self.crash = first if first and first.kind == "crash" and first.exits else None
        self.next_start_s = job.start_s
        self.next_checkpoint_s = job.start_s + job.config.checkpoint_every_s
        self.checkpoints: list[tuple[float, float]] = []
        self.step = int(rng.integers(1_000, 50_000))  # resumed from an earlier checkpoint
        self.pending: list[dict[str, np.ndarray]] = []
        self.spike_steps = 0
        self.world = job.world_size
        self.tags = {
            "cluster": tag([cluster] * self.world),
            "job": tag([job.name] * self.world),
            "node": tag([node_name(int(n)) for n in job.rank_node]),
            "rank": tag([str(r) for r in range(self.world)]),
        }
        self.profiles = tag(list(profiles) or ["unknown"] * self.world)
        self.last_stage = job.pp_rank == job.pp - 1
        self.next_membership_s = job.start_s
        self.membership_closed = False

    # ---- the step model --------------------------------------------------------------------

    def _current(self, kind: str, default: float, at_s: float) -> float:
        value = default
        for incident in self.incidents:
            if incident.kind == kind and incident.time_s <= at_s:
                value = incident.value
        return value

    def advance(
        self,
        first_s: int,
        seconds: int,
        gpu: BlockState,
        host: BlockState,
        port: BlockState,
        rng: np.random.Generator,
    ) -> list[Frame]:
        """Runs every step that starts in the block; returns the train_step rows that end in it."""
        end_s = first_s + seconds
        config, job = self.job.config, self.job
        stop = min(self.cut_s, job.end_s)
        while self.next_start_s < end_s and self.next_start_s < stop:
            t = self.next_start_s
            pause = 0.0
            if t >= self.next_checkpoint_s:
                pause = config.checkpoint_s
                self.checkpoints.append((t, t + pause))
                self.next_checkpoint_s += config.checkpoint_every_s
            second = min(max(int(t) - first_s, 0), seconds - 1)
            rows = self._step(t, pause, second, gpu, host, port, rng)
            if rows is None:
                self.next_start_s = np.inf
                break
            self.pending.append(rows)
            self.next_start_s = float(rows["end_s"])
        ready = [r for r in self.pending if r["end_s"] < end_s]
        self.pending = [r for r in self.pending if r["end_s"] >= end_s]
        return [self._frame(ready)] if ready else []

    def _step(
        self,
        t: float,
        pause: float,
        second: int,
        gpu: BlockState,
        host: BlockState,
        port: BlockState,
        rng: np.random.Generator,
    ) -> dict[str, np.ndarray] | None:
        job, config = self.job, self.job.config
        base_compute = config.step_s * (1 - config.comm_fraction)
        base_comm = config.step_s * config.comm_fraction
        stage = np.where(
            self.last_stage, self._current("stage_factor", config.last_stage_factor, t), 1.0
        )
        sigma = self._current("seq_noise", config.seq_noise, t)
        replica_cost = rng.lognormal(-(sigma**2) / 2, sigma, job.dp)[job.dp_rank]
        compute = (
            base_compute
            * stage
            * replica_cost
            * _at(gpu.get("compute"), second, job.rank_gpu)
            * _at(host.get("compute"), second, job.rank_node)
            * (1 + rng.normal(0, 0.003, self.world))
        )
        own_comm = (
            base_comm
            * _at(gpu.get("comm"), second, job.rank_gpu)
            * _at(port.get("comm"), second, job.rank_gpu)
        )
        work = float(np.max(compute + own_comm))
        end = t + pause + work
        if end > self.cut_s:
            return None
        self.step += 1
        # Ranks leave the final collective a few microseconds to milliseconds apart.
        step_time = pause + work + rng.uniform(0, 0.002, self.world)
        return {
            "end_s": np.float64(end),
            "time_s": end + rng.uniform(0, 0.003, self.world),
            "step": np.full(self.world, self.step, np.int64),
            "step_time_seconds": step_time,
            "compute_seconds": compute,
            "comm_seconds": step_time - pause - compute,
            "tokens_per_second": TOKENS_PER_RANK_STEP * replica_cost / step_time,
            "loss": self._loss(t, rng),
            "checkpoint_seconds": np.full(self.world, pause),
        }

    def _loss(self, t: float, rng: np.random.Generator) -> np.ndarray:
        job = self.job
        base = 1.7 + 2.0 * np.exp(-self.step / 20_000)
        loss = base * (1 + rng.normal(0, 0.015, job.dp))[job.dp_rank]
        for incident in self.incidents:
            if incident.kind != "loss_spike" or incident.time_s > t:
                continue
            if self.spike_steps == 0:
                # The corrupted replica's own loss shows it first, the rest after the allreduce.
                loss = np.where(job.dp_rank == int(incident.value), loss * 6.0, loss)
            else:
                loss = loss * (1 + 2.5 * np.exp(-(self.spike_steps - 1) / 8))
            self.spike_steps += 1
        return loss

    def _frame(self, ready: list[dict[str, np.ndarray]]) -> Frame:
        columns: tuple[str, ...] = ("step", "step_time_seconds", "compute_seconds",
                                    "comm_seconds", "tokens_per_second", "loss")  # fmt: skip
        if self.job.config.checkpoint_marked:  # the hook times its checkpoint section
            columns += ("checkpoint_seconds",)
        fields = {name: np.concatenate([r[name] for r in ready]) for name in columns}
        for name in columns[1:]:
            fields[name] = np.round(fields[name], 6)
        times = np.concatenate([r["time_s"] for r in ready])
        tags = {name: np.tile(values, len(ready)) for name, values in self.tags.items()}
        return Frame("train_step", _ns(self.start_ns, times), tags, fields)

    # ---- what the job's GPUs are doing ----------------------------------------------------

    def activity(
        self, first_s: int, seconds: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per second and rank: GPU utilization, network traffic share, whether a process holds
        the GPU; and per second whether the job is writing a checkpoint."""
        t = first_s + np.arange(seconds)
        running = (t >= self.job.start_s) & (t < min(self.cut_s, self.job.end_s))
        alive = (t >= self.job.start_s) & (t < self.gone_s)
        checkpointing = np.zeros(seconds, dtype=bool)
        for start, end in self.checkpoints:
            checkpointing |= (t >= np.floor(start)) & (t < end)
        training = running & ~checkpointing
        util = np.where(training, TRAIN_UTIL, np.where(running, CHECKPOINT_UTIL, 0.0))
        util = np.repeat(util[:, None], self.world, axis=1)
        if self.hang is not None:
            # Waiting ranks spin inside NCCL kernels; the stuck node's GPUs sit idle.
            hung = (t >= self.hang.time_s) & alive
            spinning = np.where(self.job.rank_node == self.hang.node, 0.0, SPIN_UTIL)
            util[hung] = spinning
        if self.crash is not None:
            # The ranks waiting on the dead one spin in NCCL kernels until their watchdog
            # kills them, one by one (the dead rank's GPU idles at once).
            exits = np.array(self.crash.exits)
            waiting = (t[:, None] >= self.crash.time_s) & (t[:, None] < exits[None, :])
            util[waiting & alive[:, None]] = SPIN_UTIL
        traffic = np.repeat(training[:, None].astype(float), self.world, axis=1)
        held = np.repeat(alive[:, None], self.world, axis=1)
        return util, traffic, held, checkpointing & running

    # ---- membership -----------------------------------------------------------------------

    def membership(self, first_s: int, seconds: int) -> list[Frame]:
        """Rows at job start and every minute while alive, and a final inactive set; without
        the fields the job's hook does not know (``membership_omits``)."""
        end_s = first_s + seconds
        frames = []
        while self.next_membership_s < min(end_s, self.gone_s):
            frames.append(self._membership_frame(self.next_membership_s, active=True))
            self.next_membership_s += MEMBERSHIP_EVERY_S
        if not self.membership_closed and first_s <= self.gone_s < end_s:
            frames.append(self._membership_frame(self.gone_s, active=False))
            self.membership_closed = True
        return frames

    def _membership_frame(self, at_s: float, active: bool) -> Frame:
        job, n = self.job, self.world
        fields = {
            "gpu": (job.rank_gpu % (len(job.rank_gpu) // len(job.nodes))).astype(np.int64),
            "world_size": np.full(n, n, np.int64),
            "dp_rank": job.dp_rank.astype(np.int64),
            "pp_rank": job.pp_rank.astype(np.int64),
            "tp_rank": job.tp_rank.astype(np.int64),
            "pp_size": np.full(n, job.pp, np.int64),
            "profile": self.profiles,
            "active": np.full(n, active, dtype=bool),
        }
        for name in job.config.membership_omits:
            del fields[name]
        times = np.full(n, _ns(self.start_ns, np.float64(at_s)), np.int64)
        return Frame("job_membership", times, dict(self.tags), fields)


def _at(values: np.ndarray | float, second: int, columns: np.ndarray) -> np.ndarray | float:
    if isinstance(values, np.ndarray):
        return values[second, columns]
    return values


def _ns(start_ns: int, seconds: np.ndarray | float) -> np.ndarray:
    return start_ns + np.round(np.asarray(seconds) * 1e9).astype(np.int64)
