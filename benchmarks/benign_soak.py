"""False events per 1,000 node-hours on long benign-only runs (benchmarks/scenarios/).

The evaluation's benign scenarios are short; a soak gives the false-event rate an exposure.
`benign_soak` is 64 nodes for two hours (128 node-hours a seed); `quirky_soak` is 64 nodes for
six hours with a third of the fleet quirky (384 node-hours a seed, so 16 seeds give 6,144
node-hours: zero events there bound the rate below 0.49 per 1,000 node-hours, 95 %). Prints,
per mode, the events, the exposure, the rate, its one-sided 95 % Poisson upper bound
(chi-square: 3.0 / exposure when there is no event) and the wall time per node-hour.

    .venv/bin/python benchmarks/benign_soak.py [--modes reflex,threshold]
    .venv/bin/python benchmarks/benign_soak.py --scenario quirky_soak --seeds 16 --modes reflex \
        --jobs 2
    .venv/bin/python benchmarks/benign_soak.py --scenario quirky_soak --duration-s 1800  # short
    .venv/bin/python benchmarks/benign_soak.py --scenario quirky_soak --modes reflex \
        --impact-model benchmarks/impact-library-seed11.json  # Reflex with the learned model
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import multiprocessing
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from reflex_localize.flows.impact.model import ImpactModel
from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.judge.job_step import JobConfig
from reflex_localize.flows.runner import run_in_process
from reflex_localize.schemas.frame import Frame
from reflex_localize.shell.simulated_source import SimulatorSource
from reflex_localize.simulator import Simulation, load_scenario

SCENARIOS = Path(__file__).parent / "scenarios"
CONFIDENCE = 0.95


class SoakSource(SimulatorSource):
    """The simulator source, optionally cut to a shorter duration (a quick look at a soak)."""

    def __init__(self, scenario: str, seed: int, duration_s: float | None) -> None:
        super().__init__(scenario, seed, 1, 10.0)
        self.duration_s = duration_s

    def _simulate(
        self, window_seconds: float, nodes: Callable[[str], bool] | None
    ) -> Iterable[list[Frame]]:
        scenario = load_scenario(self.scenario)
        if self.duration_s is not None:
            scenario = dataclasses.replace(scenario, duration_s=self.duration_s)
        return Simulation(scenario, seed=self.seed).chunks(window_seconds, nodes)


def poisson_upper(events: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided upper confidence limit of a Poisson mean after ``events`` counts: the mean
    at which seeing ``events`` or fewer has probability 1 - confidence (chi2(2k+2)/2).

    >>> round(poisson_upper(0), 3), round(poisson_upper(1), 3), round(poisson_upper(5), 2)
    (2.996, 4.744, 10.51)
    """
    low, high = 0.0, events + 10.0 * math.sqrt(events + 1) + 10.0
    for _ in range(100):  # bisection on P(X <= events; mean), which falls as the mean grows
        mean = (low + high) / 2
        term = total = math.exp(-mean)
        for k in range(1, events + 1):
            term *= mean / k
            total += term
        low, high = (mean, high) if total > 1 - confidence else (low, mean)
    return (low + high) / 2


def soak_events(
    run: tuple[str, int, float | None, str, str | None],
) -> list[tuple[int, LocalizationEvent]]:
    """One seed's events, each with the seed (in a pool's process)."""
    path, seed, duration_s, mode, impact_path = run
    impact = None if impact_path is None else ImpactModel.load(Path(impact_path))
    # The simulator source streams: hours of 64 nodes would not fit in memory at once.
    source = SoakSource(path, seed, duration_s)
    config = JobConfig(mode=mode, impact=impact)
    return [(seed, event) for event in run_in_process(source, job_config=config).events]


def label_of(mode: str, impact: str | None) -> str:
    return mode + (" + impact" if impact else "")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--modes", default="reflex,peer_only,temporal_only,threshold")
    parser.add_argument("--scenario", default="benign_soak", help="benign_soak or quirky_soak")
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds, from --first-seed up")
    parser.add_argument("--first-seed", type=int, default=7, help="to extend an earlier run")
    parser.add_argument("--duration-s", type=float, help="cut each run to this many seconds")
    parser.add_argument("--jobs", type=int, default=1, help="seeds run at once, one process each")
    parser.add_argument("--impact-model", help="a `reflex fit-impact` model for the reflex mode")
    args = parser.parse_args()
    path = str(SCENARIOS / f"{args.scenario}.toml")
    scenario = load_scenario(path)
    duration_s = args.duration_s or scenario.duration_s
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    for mode in args.modes.split(","):
        started, events = time.monotonic(), []
        impact = args.impact_model if mode == "reflex" else None
        runs = [(path, seed, args.duration_s, mode, impact) for seed in seeds]
        # Seeds are independent: --jobs runs them in that many processes at once.
        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            # A line per seed as it ends: a soak cut short (a session's end, a kill) still
            # leaves the seeds it finished, and their events, in its log.
            for seed, seed_events in zip(seeds, pool.imap(soak_events, runs), strict=True):
                events += seed_events
                print(
                    f"  {label_of(mode, impact)} seed {seed}: {len(seed_events)} events "
                    f"(+{time.monotonic() - started:.0f} s)",
                    flush=True,
                )
                for _, event in seed_events:
                    print(f"    {event.trigger} {event.job}: {event.summary}", flush=True)
        node_hours = len(seeds) * scenario.nodes * duration_s / 3600
        wall = time.monotonic() - started
        rate = 1000 * len(events) / node_hours
        bound = 1000 * poisson_upper(len(events)) / node_hours
        label = label_of(mode, impact)
        print(
            f"{label:14s} events={len(events):4d} node_hours={node_hours:.0f} "
            f"false_per_1k_node_hours={rate:.2f} upper95={bound:.2f} "
            f"wall_s={wall:.0f} wall_s_per_node_hour={wall / node_hours:.2f}",
            flush=True,
        )
        for seed, event in events[:10]:
            print(f"    seed {seed}: {event.trigger} {event.job}: {event.summary}")


if __name__ == "__main__":
    main()
