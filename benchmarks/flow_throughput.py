"""Points per second through the localization flow, 1 and 2 processes, from the in-process
simulator and from a line-protocol file. Each run is a real ``reflex flow`` (``bytewax.run``,
files sink, no recovery); the wall time includes process start. The CPU seconds of the run's
processes (user + system, per million points) and the load average before it are printed too:
two processes can only beat one by what the machine's free cores allow, but they must not cost
more CPU than one (a file is read by byte range: no process reads another's lines).

    .venv/bin/python benchmarks/flow_throughput.py [--scenario demo] [--shards 4]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.simulator import Simulation, load_scenario

CLI = [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()", "flow"]


def run_flow(source: str, out: Path, processes: int, shards: int) -> tuple[float, float]:
    """Wall seconds, and CPU seconds of the flow's processes."""
    command = [*CLI, "--source", source, "--sink", "files", "--out", str(out), "--no-recovery"]
    command += ["--shards", str(shards), "--cluster", "sim", "-p", str(processes)]
    used = _children_cpu()
    began = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - began, _children_cpu() - used


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", default="demo")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--file-seconds", type=int, default=400,
                        help="Simulated seconds written to the line-protocol file.")  # fmt: skip
    parser.add_argument("--only", choices=("simulator", "file"), default=None,
                        help="Run one source alone.")  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        capture = Path(tmp) / "capture.lp"
        points = file_points = 0
        with capture.open("w") as handle:
            for number, chunk in enumerate(
                Simulation(load_scenario(args.scenario), args.seed).chunks(10.0)
            ):
                for frame in chunk:
                    lines = encode_frame(frame)
                    points += len(lines)
                    if number * 10 < args.file_seconds:
                        file_points += len(lines)
                        handle.write("\n".join(lines) + "\n")
        print(f"scenario {args.scenario}: {points:,} points ({file_points:,} in the file), "
              f"{args.shards} shards")  # fmt: skip
        for name, source, count in (
            ("simulator", f"sim:{args.scenario}:{args.seed}", points),
            ("line-protocol file", f"file:{capture}", file_points),
        ):
            if args.only is not None and args.only not in name:
                continue
            rates, cpus = {}, {}
            for processes in (1, 2):
                load = os.getloadavg()[0]
                seconds, cpu = run_flow(
                    source, Path(tmp) / f"{name}-{processes}", processes, args.shards
                )
                rates[processes], cpus[processes] = count / seconds, cpu
                print(f"{name:>19}, {processes} process(es): {seconds:6.1f} s  "
                      f"{rates[processes]:>9,.0f} points/s  cpu {cpu:5.1f} s "
                      f"({cpu / count * 1e6:.2f} s per million points)  "
                      f"(load before {load:.1f}, {os.cpu_count()} cores)")  # fmt: skip
            print(f"{name:>19}: scaling 2/1 = {rates[2] / rates[1]:.2f}x, "
                  f"CPU of 2 / CPU of 1 = {cpus[2] / cpus[1]:.2f} (at most 1.1)")  # fmt: skip


if __name__ == "__main__":
    main()
