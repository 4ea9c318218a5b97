"""How fast the simulator makes telemetry: points (rows) per second of wall time.

The flow's benchmarks read from the simulator, so it must be far faster than the flow's
target (150k points/s); this prints the figures for a 4,096-GPU cluster (the mixture
scenario scaled) by default. Line-protocol encoding, which only ``reflex simulate --out``
pays, is measured apart on one chunk.

    .venv/bin/python benchmarks/simulator_throughput.py [--gpus 4096] [--seconds 120]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.simulator import Simulation, load_scenario, scale_scenario

FLOW_TARGET_POINTS_PER_S = 150_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=4096)
    parser.add_argument("--seconds", type=int, default=120, help="simulated seconds to generate")
    parser.add_argument("--chunk", type=int, default=10, help="simulated seconds per chunk")
    parser.add_argument("--scenario", default="mixture")
    args = parser.parse_args()

    scenario = scale_scenario(load_scenario(args.scenario), args.gpus)
    started = time.perf_counter()
    sim = Simulation(scenario, seed=1)
    setup_s = time.perf_counter() - started
    per_measurement: Counter[str] = Counter()
    last_chunk = []
    started = time.perf_counter()
    for number, chunk in enumerate(sim.chunks(seconds=float(args.chunk))):
        for frame in chunk:
            per_measurement[frame.measurement] += len(frame)
        last_chunk = chunk
        if (number + 1) * args.chunk >= args.seconds:
            break
    generate_s = time.perf_counter() - started
    points = sum(per_measurement.values())
    simulated_s = min(args.seconds, sim.duration_s)

    started = time.perf_counter()
    encoded = sum(len(encode_frame(frame)) for frame in last_chunk)
    encode_s = time.perf_counter() - started

    rate = points / generate_s
    print(f"cluster: {len(sim.cluster.nodes)} nodes, {sim.cluster.gpu_count} GPUs, "
          f"{len(sim.cluster.jobs)} jobs; setup {setup_s:.2f} s")  # fmt: skip
    print(f"generated {points:,} points for {simulated_s:.0f} simulated s in {generate_s:.2f} s")
    print(f"  {rate:,.0f} points/s ({rate / FLOW_TARGET_POINTS_PER_S:.1f}x the flow's 150k/s)")
    print(f"  {simulated_s / generate_s:.1f} simulated seconds per wall second")
    for name, count in per_measurement.most_common():
        print(f"    {name:15s} {count:>12,}")
    print(f"line protocol: {encoded / encode_s:,.0f} lines/s ({encoded:,} lines of one chunk)")


if __name__ == "__main__":
    main()
