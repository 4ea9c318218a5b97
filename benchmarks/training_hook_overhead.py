"""Cost of the training hook on the training thread, per call (target: < 50 µs).

Measures ``hook.step()`` and the ``hook.compute`` / ``hook.comm`` context managers with a sink
that discards, and again with a sink that takes 200 ms per batch (InfluxDB slow), to show the
training thread does not wait for it.

    .venv/bin/python benchmarks/training_hook_overhead.py --calls 100000
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from reflex_localize.collectors.training_hook import TrainingHook


def measure(call: Callable[[], None], calls: int) -> list[float]:
    costs = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        started = clock()
        call()
        costs.append((clock() - started) / 1000)
    return costs


def report(label: str, costs: list[float]) -> None:
    costs.sort()
    p99 = costs[int(len(costs) * 0.99)]
    mean, median = statistics.fmean(costs), costs[len(costs) // 2]
    print(
        f"{label:<44} mean {mean:6.2f} µs  median {median:6.2f} µs"
        f"  p99 {p99:6.2f} µs  max {costs[-1]:8.1f} µs"
    )


def run(label: str, sink: Callable[[str], None], calls: int) -> None:
    hook = TrainingHook(job="bench", rank=0, world_size=8, cluster="c", node="n", sink=sink,
                        env={}, max_queue=calls * 2)  # fmt: skip

    def with_phases() -> None:
        with hook.compute:
            pass
        with hook.comm:
            pass
        hook.step(tokens=4096, loss=2.0)

    report(f"step() [{label}]", measure(lambda: hook.step(tokens=4096), calls))
    report(f"compute+comm+step() [{label}]", measure(with_phases, calls))
    hook.close(timeout_s=10)
    print(f"  stats: {hook.stats}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    args = parser.parse_args()
    run("discarding sink", lambda batch: None, args.calls)
    run("sink taking 200 ms", lambda batch: time.sleep(0.2), args.calls)


if __name__ == "__main__":
    main()
