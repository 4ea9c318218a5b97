"""Points per second through the localization flow, 1 and 2 processes, from the in-process
simulator and from a line-protocol file. Each run is a real ``reflex flow`` (``bytewax.run``,
files sink, no recovery); the wall time includes process start. The CPU seconds of the run's
processes (user + system, per million points) and the load average before it are printed too:
two processes can only beat one by what the machine's free cores allow, but they must not cost
more CPU than one (a file is read by byte range: no process reads another's lines).

``--rounds N`` runs the configurations in turn N times and gives medians (a shared machine's
runs vary by more than the differences sought). A third configuration, one process run as a
Bytewax cluster of one (``-i 0 -a HOST:PORT``), separates what any process of a cluster costs
(its main thread takes the GIL every millisecond to check for signals) from what splitting the
work costs. ``--contention`` adds a fourth: two single processes, each over the whole input, run
at once. Neither waits for the other, so what each costs above one alone is the machine's (two
busy cores sharing caches and memory, and whatever else runs there), not the flow's: the CPU of
2 processes over that of 1 can be read against it. The package is byte-compiled first, as an
installed wheel is: with ``PYTHONDONTWRITEBYTECODE`` set, or sources edited since their
``.pyc``, each process would compile the modules it imports (about 0.1 s of CPU each).

    .venv/bin/python benchmarks/flow_throughput.py [--scenario demo] [--shards 4] [--rounds 3]
        [--contention]
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import reflex_localize
from reflex_localize.influx.local_server import free_port
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.simulator import Simulation, load_scenario

CLI = [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()", "flow"]
# Configuration -> the flags that make it; None: a cluster of one on a free port.
CONFIGURATIONS: dict[str, list[str] | None] = {
    "1 process": ["-p", "1"],
    "1 (cluster)": None,
    "2 processes": ["-p", "2"],
}


# The control of --contention: two single processes at once, each over the whole input.
CONTROL = "2 alone at once"


def run_flows(source: str, outs: list[Path], flags: list[str], shards: int) -> tuple[float, float]:
    """Wall seconds, and CPU seconds of the processes, of one ``reflex flow`` per folder of
    ``outs``, all started at once."""
    used = _children_cpu()
    began = time.perf_counter()
    runs = [
        subprocess.Popen(
            [*CLI, "--source", source, "--sink", "files", "--out", str(out), "--no-recovery",
             "--shards", str(shards), "--cluster", "sim", *flags],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for out in outs
    ]  # fmt: skip
    for run in runs:
        if run.wait() != 0:
            raise subprocess.CalledProcessError(run.returncode, run.args)
    return time.perf_counter() - began, _children_cpu() - used


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def compile_package() -> None:
    """Byte-compiles the package's floors (``reflex_localize/*`` are links to them, which
    compileall does not follow)."""
    for floor in Path(reflex_localize.__file__).parent.iterdir():
        if floor.is_dir() and not floor.name.startswith("__"):
            compileall.compile_dir(floor.resolve(), quiet=1)


def write_capture(path: Path, scenario: str, seed: int, file_seconds: int) -> tuple[int, int]:
    """The scenario's line protocol, its first ``file_seconds`` in ``path``; points generated
    in all and points in the file."""
    points = file_points = 0
    with path.open("w") as handle:
        for number, chunk in enumerate(Simulation(load_scenario(scenario), seed).chunks(10.0)):
            for frame in chunk:
                lines = encode_frame(frame)
                points += len(lines)
                if number * 10 < file_seconds:
                    file_points += len(lines)
                    handle.write("\n".join(lines) + "\n")
    return points, file_points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", default="demo")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--file-seconds", type=int, default=400,
                        help="Simulated seconds written to the line-protocol file.")  # fmt: skip
    parser.add_argument("--only", choices=("simulator", "file"), default=None,
                        help="Run one source alone.")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1, help="Runs of each; medians.")
    parser.add_argument("--contention", action="store_true",
                        help="Also two single processes at once (the machine's cost).")  # fmt: skip
    args = parser.parse_args()
    configurations = dict(CONFIGURATIONS)
    if args.contention:
        configurations[CONTROL] = ["-p", "1"]
    compile_package()
    with tempfile.TemporaryDirectory() as tmp:
        capture = Path(tmp) / "capture.lp"
        points, file_points = write_capture(capture, args.scenario, args.seed, args.file_seconds)
        print(f"scenario {args.scenario}: {points:,} points ({file_points:,} in the file), "
              f"{args.shards} shards, {os.cpu_count()} cores")  # fmt: skip
        for name, source, count in (
            ("simulator", f"sim:{args.scenario}:{args.seed}", points),
            ("line-protocol file", f"file:{capture}", file_points),
        ):
            if args.only is not None and args.only not in name:
                continue
            walls: dict[str, list[float]] = {c: [] for c in configurations}
            cpus: dict[str, list[float]] = {c: [] for c in configurations}
            for number in range(args.rounds):
                for configuration, given in configurations.items():
                    flags = given or ["-i", "0", "-a", f"127.0.0.1:{free_port()}"]
                    load = os.getloadavg()[0]
                    out = Path(tmp) / f"{name}-{number}-{configuration}"
                    outs = [out / "a", out / "b"] if configuration == CONTROL else [out]
                    seconds, cpu = run_flows(source, outs, flags, args.shards)
                    cpu /= len(outs)  # the control: CPU of one of its processes
                    walls[configuration].append(seconds)
                    cpus[configuration].append(cpu)
                    print(f"{name:>19}, {configuration:>11}: {seconds:6.1f} s  "
                          f"{count * len(outs) / seconds:>9,.0f} points/s  cpu {cpu:5.1f} s "
                          f"({cpu / count * 1e6:.2f} s per million points)  "
                          f"(load before {load:.1f})", flush=True)  # fmt: skip
            wall = {c: statistics.median(v) for c, v in walls.items()}
            cpu_ = {c: statistics.median(v) for c, v in cpus.items()}
            one, cluster, two = (cpu_[c] for c in CONFIGURATIONS)
            print(f"{name:>19}, medians of {args.rounds}: scaling 2/1 = "
                  f"{wall['1 process'] / wall['2 processes']:.2f}x, CPU per million points "
                  f"{one / count * 1e6:.2f} / {cluster / count * 1e6:.2f} / "
                  f"{two / count * 1e6:.2f} (1 / 1 as a cluster / 2), CPU of 2 / CPU of 1 = "
                  f"{two / one:.2f} (at most 1.1), of 2 / of a cluster of 1 = "
                  f"{two / cluster:.2f}")  # fmt: skip
            if CONTROL in cpu_:  # two processes that share nothing cost this on this machine
                print(f"{name:>19}, medians of {args.rounds}: one of two single processes at "
                      f"once costs {cpu_[CONTROL] / one:.2f}x one alone (the machine's "
                      f"contention); CPU of 2 / CPU of one of those = "
                      f"{two / cpu_[CONTROL]:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
