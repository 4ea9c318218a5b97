"""False events per 1,000 node-hours on a long benign-only run (benchmarks/scenarios/).

The evaluation's benign scenarios are short; this one gives the false-event rate an exposure
of 128 node-hours. Prints the events, the exposure and the rate, for Reflex and the baselines.

    .venv/bin/python benchmarks/benign_soak.py [--modes reflex,threshold]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from reflex_localize.flows.job_step import JobConfig
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource
from reflex_localize.simulator import Simulation, load_scenario

SCENARIO = Path(__file__).parent / "scenarios" / "benign_soak.toml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--modes", default="reflex,peer_only,temporal_only,threshold")
    args = parser.parse_args()
    sim = Simulation(load_scenario(str(SCENARIO)), seed=7)
    for mode in args.modes.split(","):
        started = time.monotonic()
        # The simulator source streams: two hours of 64 nodes would not fit in memory at once.
        result = run_in_process(
            SimulatorSource(str(SCENARIO), 7, 1, 10.0), job_config=JobConfig(mode=mode)
        )
        node_hours = len(sim.cluster.nodes) * sim.duration_s / 3600
        rate = 1000 * len(result.events) / node_hours
        print(
            f"{mode:14s} events={len(result.events):4d} node_hours={node_hours:.0f} "
            f"false_per_1k_node_hours={rate:.2f} wall_s={time.monotonic() - started:.0f}",
            flush=True,
        )
        for event in result.events[:10]:
            print(f"    {event.trigger} {event.job}: {event.summary}")


if __name__ == "__main__":
    main()
