"""What a job does after a fault: crash with a NCCL cascade, hang, or a changed step model.

A crash is first in time on the root (its XID, its rank's exit), then loud everywhere: every
other rank's NCCL watchdog times out at a jittered time and its process exits. A hang logs
nothing at first; the timeouts come only from the ranks that were waiting, so the cause is
the node whose ranks stay silent.

>>> import numpy as np
>>> from reflex_localize.simulator.scenario import load_scenario
>>> from reflex_localize.simulator.cluster import build_cluster
>>> job = build_cluster(load_scenario("demo")).jobs[0]
>>> events, incident = crash(job, 100.0, 5, "boom", np.random.default_rng(0), 0)
>>> len(events) == 2 * job.world_size - 1, incident.kind, incident.time_s
(True, 'crash', 100.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reflex_localize.simulator.cluster import JobSpec, node_name
from reflex_localize.simulator.events import EventRecord


@dataclass(frozen=True)
class JobIncident:
    """A change to a job's step model at ``time_s``.

    kind: "crash" (no step completes after time_s; the ranks waiting on the dead one spin in
    their collective until each exits, ``exits``; processes gone at stop_s), "hang" (no
    step completes; GPUs spin until stop_s, except on ``node``, the cause), "loss_spike"
    (replica ``value`` computes garbage), "stage_factor" (last pipeline stage costs ``value``
    times a normal stage), "seq_noise" (sequence-length noise sigma becomes ``value``).
    """

    kind: str
    job: str
    time_s: float
    stop_s: float = 0.0
    node: int = -1
    value: float = 0.0
    exits: tuple[float, ...] = ()  # a crash: when each rank's process exits, by rank


def _ns(start_ns: int, seconds: float | np.ndarray) -> np.ndarray:
    return start_ns + np.round(np.asarray(seconds) * 1e9).astype(np.int64)


def crash(
    job: JobSpec, time_s: float, root_gpu: int, reason: str, rng: np.random.Generator, start_ns: int
) -> tuple[list[EventRecord], JobIncident]:
    """The rank on global GPU ``root_gpu`` dies of ``reason``; every other rank times out."""
    ranks = np.arange(job.world_size)
    root = ranks[job.rank_gpu == root_gpu]
    root_ranks = set(root.tolist())
    timeout = job.config.nccl_timeout_s
    # Watchdogs poll, and ranks entered the collective at different times: jitter by rank.
    timeout_at = time_s + timeout * rng.uniform(0.8, 1.25, job.world_size)
    exit_at = timeout_at + rng.uniform(1.0, 5.0, job.world_size)
    exit_at[root] = time_s + rng.uniform(0.2, 2.0, len(root))
    events = []
    for rank in ranks.tolist():
        node = node_name(int(job.rank_node[rank]))
        if rank in root_ranks:
            message = f"[rank{rank}] process exited: {reason}"
        else:
            events.append(
                EventRecord(
                    int(_ns(start_ns, timeout_at[rank])),
                    node,
                    "training",
                    "nccl_timeout",
                    {
                        "job": job.name,
                        "rank": rank,
                        "message": f"[Rank {rank}] Watchdog caught collective operation "
                        f"timeout: ran for {int(timeout * 1000)} milliseconds before timing out",
                    },
                )
            )
            message = f"[rank{rank}] process exited after NCCL watchdog timeout"
        events.append(
            EventRecord(
                int(_ns(start_ns, exit_at[rank])),
                node,
                "training",
                "process_exit",
                {"code": 1, "job": job.name, "rank": rank, "message": message},
            )
        )
    exits = tuple(exit_at.tolist())
    return events, JobIncident("crash", job.name, time_s, stop_s=float(exit_at.max()), exits=exits)


def hang(
    job: JobSpec, time_s: float, cause_node: int, rng: np.random.Generator, start_ns: int
) -> tuple[list[EventRecord], JobIncident]:
    """Every rank stops at ``time_s``; the ranks waiting on ``cause_node`` time out."""
    timeout = job.config.nccl_timeout_s
    timeout_at = time_s + timeout * rng.uniform(1.0, 1.25, job.world_size)
    waiting = job.rank_node != cause_node
    events = [
        EventRecord(
            int(_ns(start_ns, timeout_at[rank])),
            node_name(int(job.rank_node[rank])),
            "training",
            "nccl_timeout",
            {
                "job": job.name,
                "rank": rank,
                "message": f"[Rank {rank}] Watchdog caught collective operation timeout: "
                f"ran for {int(timeout * 1000)} milliseconds before timing out",
            },
        )
        for rank in np.flatnonzero(waiting).tolist()
    ]
    # The launcher tears the job down once the watchdogs fire, the stuck ranks included.
    stop_s = float(timeout_at.max()) + 5.0
    for rank in range(job.world_size):
        stuck = not waiting[rank]
        events.append(
            EventRecord(
                int(_ns(start_ns, stop_s + rng.uniform(0.0, 2.0))),
                node_name(int(job.rank_node[rank])),
                "training",
                "process_exit",
                {
                    "code": 137 if stuck else 1,
                    "job": job.name,
                    "rank": rank,
                    "message": f"[rank{rank}] "
                    + ("killed by the launcher" if stuck else "exited after NCCL timeout"),
                },
            )
        )
    return events, JobIncident("hang", job.name, time_s, stop_s=stop_s + 2.0, node=cause_node)
