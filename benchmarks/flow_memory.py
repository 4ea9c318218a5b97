"""Resident memory of the localization flow over one simulated hour of a 4,096-GPU cluster
(the demo scenario scaled up and stretched), in one process, sampled every few seconds.

Bounded means the RSS levels off once the baselines of every entity exist: the flow keeps
per-entity state, not history. It creeps instead, through CPython's small-object allocator
(its arenas stay for a few live objects each): ``--plain-loop`` runs the flow's two steps
without Bytewax, ``--pymalloc`` adds pymalloc's arenas and blocks in use to each progress line,
and ``PYTHONMALLOC=malloc`` in the environment swaps the allocator.

    .venv/bin/python benchmarks/flow_memory.py [--gpus 4096] [--seconds 3600] [--plain-loop]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import psutil
from bytewax.inputs import FixedPartitionedSource

from reflex_localize.flows.io.one_cluster import OneCluster
from reflex_localize.flows.io.sources import _WindowPartition, shard_names, split_windows
from reflex_localize.flows.judge.job_step import JobConfig
from reflex_localize.flows.judge.shard_step import ShardConfig, ShardState
from reflex_localize.flows.localize import _ShardLogic, job_logic
from reflex_localize.flows.messages import ErrorRecord, JobWindow, WindowBatch
from reflex_localize.flows.runner import run_in_process
from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator import Simulation, load_scenario
from reflex_localize.simulator.scenario import scale_scenario


class ScaledSimulation(FixedPartitionedSource[WindowBatch, int]):
    """The simulator source for a scenario object (SimulatorSource takes library names)."""

    def __init__(self, gpus: int, seconds: int, n_shards: int, window_seconds: float) -> None:
        scenario = scale_scenario(load_scenario("demo"), gpus)
        self.scenario = dataclasses.replace(scenario, duration_s=float(seconds))
        self.n_shards, self.window_ns = n_shards, int(window_seconds * 1e9)
        self.points = 0

    def list_parts(self) -> list[str]:
        return shard_names(self.n_shards)

    def build_part(self, step_id: str, for_part: str, resume: int | None) -> _WindowPartition:
        return _WindowPartition(self._windows(), for_part, self.n_shards, self.window_ns, resume)

    def _windows(self) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        for frames in Simulation(self.scenario, seed=7).chunks(seconds=self.window_ns / 1e9):
            self.points += sum(len(f) for f in frames)
            yield from split_windows(frames, self.window_ns)


def plain_loop(source: ScaledSimulation) -> int:
    """The flow's shard and job steps called in a loop, as Bytewax calls them (one worker):
    what memory the steps keep, without the runtime's. Returns the number of events."""
    names = source.list_parts()
    parts = [source.build_part("telemetry", name, None) for name in names]
    one = OneCluster("sim")
    shards = {name: _ShardLogic(ShardState(ShardConfig(cluster="sim")), one) for name in names}
    build = job_logic(JobConfig(cluster="sim"))
    jobs: dict[str, Any] = {}
    events = 0
    while parts:
        for part in list(parts):
            try:
                batches = part.next_batch()
            except StopIteration:
                parts.remove(part)
                continue
            for batch in batches:
                for _, item in shards[batch.shard].on_item(batch)[0]:
                    if isinstance(item, JobWindow):
                        logic = jobs.setdefault(item.job, build(None))
                        out = logic.on_item(item)[0]
                        events += sum(route == "event" for route, _ in out)
    return events


def pymalloc_figures() -> str:
    """pymalloc's arenas (1 MiB each) and the bytes of its blocks in use, from
    ``sys._debugmallocstats``, which writes to the C-level stderr."""
    with tempfile.TemporaryFile(mode="w+") as captured:
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        text = captured.read()

    def figure(name: str) -> int:
        found = re.search(rf"# {name}\s*=\s*([\d,]+)", text)
        return int(found.group(1).replace(",", "")) if found else -1

    arenas, used = figure("arenas allocated current"), figure("bytes in allocated blocks")
    return f"  pymalloc arenas {arenas}, blocks in use {used / 2**20:.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpus", type=int, default=4096)
    parser.add_argument("--seconds", type=int, default=3600)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--plain-loop", action="store_true", help="the steps without Bytewax")
    parser.add_argument("--pymalloc", action="store_true", help="print pymalloc's figures")
    args = parser.parse_args()
    source = ScaledSimulation(args.gpus, args.seconds, args.shards, 10.0)
    process = psutil.Process()
    samples: list[tuple[float, int, float]] = []
    done = threading.Event()

    def sample() -> None:
        began = time.monotonic()
        while not done.wait(5.0):
            samples.append((time.monotonic() - began, source.points, process.memory_info().rss))
            if len(samples) % 12 == 0:  # progress for a long run, in the same format
                wall_s, points, rss = samples[-1]
                extra = pymalloc_figures() if args.pymalloc else ""
                print(f"  t={wall_s:6.0f} s  points {points:>12,}  RSS {rss / 2**20:8.0f} MiB"
                      f"{extra}", flush=True)  # fmt: skip

    threading.Thread(target=sample, daemon=True).start()
    began = time.monotonic()
    events = plain_loop(source) if args.plain_loop else len(run_in_process(source).events)
    done.set()
    wall = time.monotonic() - began
    rate = source.points / wall
    print(f"{args.gpus} GPUs, {args.seconds} simulated s: {source.points:,} points in "
          f"{wall:.0f} s ({rate:,.0f} points/s), {events} events")  # fmt: skip
    rss = [r for _, _, r in samples]
    if len(rss) >= 4:
        half = len(rss) // 2
        print(f"RSS peak {max(rss) / 2**20:.0f} MiB; mean of first half "
              f"{sum(rss[:half]) / half / 2**20:.0f} MiB, second half "
              f"{sum(rss[half:]) / (len(rss) - half) / 2**20:.0f} MiB")  # fmt: skip


if __name__ == "__main__":
    main()
