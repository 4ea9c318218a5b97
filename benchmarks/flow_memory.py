"""Resident memory of the localization flow over one simulated hour of a 4,096-GPU cluster
(the demo scenario scaled up and stretched), in one process, sampled every few seconds.

Bounded means the RSS levels off once the baselines of every entity exist: the flow keeps
per-entity state, not history.

    .venv/bin/python benchmarks/flow_memory.py [--gpus 4096] [--seconds 3600]
"""

from __future__ import annotations

import argparse
import dataclasses
import threading
import time
from collections.abc import Iterator

import psutil
from bytewax.inputs import FixedPartitionedSource

from reflex_localize.flows.messages import ErrorRecord, WindowBatch
from reflex_localize.flows.runner import run_in_process
from reflex_localize.flows.sources import _WindowPartition, shard_names, split_windows
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpus", type=int, default=4096)
    parser.add_argument("--seconds", type=int, default=3600)
    parser.add_argument("--shards", type=int, default=1)
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
                print(f"  t={wall_s:6.0f} s  points {points:>12,}  RSS {rss / 2**20:8.0f} MiB",
                      flush=True)  # fmt: skip

    threading.Thread(target=sample, daemon=True).start()
    began = time.monotonic()
    result = run_in_process(source, cluster="sim")
    done.set()
    wall = time.monotonic() - began
    rate = source.points / wall
    print(f"{args.gpus} GPUs, {args.seconds} simulated s: {source.points:,} points in "
          f"{wall:.0f} s ({rate:,.0f} points/s), {len(result.events)} events")  # fmt: skip
    rss = [r for _, _, r in samples]
    if len(rss) >= 4:
        half = len(rss) // 2
        print(f"RSS peak {max(rss) / 2**20:.0f} MiB; mean of first half "
              f"{sum(rss[:half]) / half / 2**20:.0f} MiB, second half "
              f"{sum(rss[half:]) / (len(rss) - half) / 2**20:.0f} MiB")  # fmt: skip


if __name__ == "__main__":
    main()
