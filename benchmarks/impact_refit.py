"""What keeping the impact model's training rows costs the flow, and what a refit from a week
of them costs (flows/impact/rows_log.py, `reflex fit-impact --rows`).

1. The demo (256 GPUs, 10 simulated minutes) through the flow in-process, without and with the
   rows kept, alternating: the CPU time of each run and their ratio, and the bytes kept.
2. A week of a 1,024-GPU fleet's rows, made from the demo's kept rows (each job window written
   again under four job names, at every 10 minutes of the week): the bytes, then the time and
   peak memory of a refit over it as `reflex fit-impact --rows` makes it: `row_passes` indexes
   the kept windows, `fit_impact_passes` streams them twice.

    .venv/bin/python benchmarks/impact_refit.py [--rounds 2] [--days 7]
    .venv/bin/python benchmarks/impact_refit.py --rounds 0  # the refit only
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

from reflex_localize.flows.impact.fit import fit_impact_passes
from reflex_localize.flows.impact.rows_log import ImpactRowsLog, row_passes
from reflex_localize.flows.judge.job_step import JobConfig
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

DEMO_S, DEMO_GPUS, FLEET_GPUS = 600, 256, 1024


def demo_cpu_s(rows_dir: Path | None) -> float:
    config = JobConfig(impact_recorder=ImpactRowsLog(rows_dir) if rows_dir else None)
    began = time.process_time()
    run_in_process(SimulatorSource("demo", 7, 1, 10.0), job_config=config)
    return time.process_time() - began


def week_of_rows(demo_rows: Path, out: Path, days: int) -> int:
    """The demo's kept rows repeated as a 1,024-GPU fleet's, every 10 minutes for ``days``."""
    lines = [json.loads(line) for f in demo_rows.glob("*.jsonl") for line in f.open()]
    first = min(record["t"] for record in lines)
    copies = FLEET_GPUS // DEMO_GPUS
    written = 0
    for day in range(days):
        with open(out / f"rows-2026-01-{day + 1:02d}-p0.jsonl", "w") as file:
            for period in range(86_400 // DEMO_S):
                shift = (day * 86_400 + period * DEMO_S) * 10**9
                for record in lines:
                    for copy in range(copies):
                        moved = {**record, "t": record["t"] - first + shift + 1_767_225_600 * 10**9}
                        moved["job"] = f"{record['job']}-{copy}"
                        written += file.write(json.dumps(moved, separators=(",", ":")) + "\n")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--days", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for round_ in range(args.rounds):
            without = demo_cpu_s(None)
            kept = root / f"demo-{round_}"
            with_rows = demo_cpu_s(kept)
            size = sum(p.stat().st_size for p in kept.glob("*.jsonl"))
            print(
                f"demo round {round_}: CPU {without:.2f} s without the rows kept, "
                f"{with_rows:.2f} s with ({with_rows / without:.3f}x); {size} bytes kept "
                f"({size * FLEET_GPUS / DEMO_GPUS * 86_400 / DEMO_S / 2**20:.1f} MiB a day "
                f"for {FLEET_GPUS} GPUs)",
                flush=True,
            )
        if args.rounds == 0:
            demo_cpu_s(root / "demo-0")  # the rows the week is made of
        week = root / "week"
        week.mkdir()
        written = week_of_rows(root / "demo-0", week, args.days)
        print(f"{args.days} days of {FLEET_GPUS} GPUs: {written / 2**20:.0f} MiB", flush=True)
        began = time.monotonic()
        passes, unreadable = row_passes(week, 0, 2 * 10**18)
        index_s = time.monotonic() - began
        began = time.monotonic()
        model = fit_impact_passes(passes, {})
        fit_s = time.monotonic() - began
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"indexed the kept windows in {index_s:.1f} s ({unreadable} unreadable lines); "
            f"fit {model.provenance['rows']} rank-windows in {fit_s:.1f} s (two passes); "
            f"peak RSS {peak:.0f} MiB",
            flush=True,
        )


if __name__ == "__main__":
    main()
