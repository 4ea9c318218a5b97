"""The localization flow over a line-protocol file against the yardstick the scale issue set:
a trivial stateful Bytewax flow over the same file (key each line on its node tag, count per
node). Both run in this process with ``run_main``, one after the other, so the ratio is of
one sitting on one machine; ``--rounds N`` runs them in turn N times and takes medians.

Three more lines say where the flow's time goes: the replay source alone (its partition read
to the end: the file read, windowed and decoded, no flow), the flow over the same windows
decoded beforehand (what the steps after the source cost, with the engine: the time the flow
would take with a source that cost nothing), and the block decoder alone
(:func:`schemas.line_decoder.decode_block`), a window's lines a block.

    .venv/bin/python benchmarks/replay_vs_trivial.py [--scenario demo] [--file-seconds 400]
        [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import bytewax.operators as op
from bytewax.connectors.files import FileSource
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, run_main

from reflex_localize.flows.io.sources import LineProtocolSource, MemorySource
from reflex_localize.flows.runner import run_in_process
from reflex_localize.schemas.frame import Frame
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.schemas.line_decoder import decode_block
from reflex_localize.schemas.line_file import data_lines, line_stamp, raw_tag
from reflex_localize.simulator import Simulation, load_scenario


def write_capture(path: Path, scenario: str, seed: int, seconds: int) -> int:
    lines = 0
    with path.open("w") as handle:
        for number, chunk in enumerate(Simulation(load_scenario(scenario), seed).chunks(10.0)):
            if number * 10 >= seconds:
                break
            for frame in chunk:
                encoded = encode_frame(frame)
                lines += len(encoded)
                handle.write("\n".join(encoded) + "\n")
    return lines


def trivial_seconds(path: Path) -> float:
    """Key on the node tag, count per node: what the engine allows for this file."""
    flow = Dataflow("trivial")
    lines = op.input("lines", flow, FileSource(path))
    keyed = op.key_on("by_node", lines, lambda line: raw_tag(line, "node") or "-")
    counts = op.stateful_map("count", keyed, lambda count, _: ((count or 0) + 1,) * 2)
    op.output("out", counts, TestingSink([]))
    began = time.perf_counter()
    run_main(flow)
    return time.perf_counter() - began


def flow_seconds(path: Path) -> float:
    began = time.perf_counter()
    run_in_process(LineProtocolSource(path, 1, 10.0))
    return time.perf_counter() - began


def source_seconds(path: Path) -> tuple[float, list[tuple[int, list[Frame]]]]:
    """The replay source alone: its one partition read to the end; and the windows it gave."""
    source = LineProtocolSource(path, 1, 10.0)
    began = time.perf_counter()
    part = source.build_part("telemetry", source.list_parts()[0], None)
    windows = []
    try:
        while True:
            windows += [(batch.window, batch.frames) for batch in part.next_batch()]
    except StopIteration:
        pass
    return time.perf_counter() - began, windows


def decoded_flow_seconds(windows: list[tuple[int, list[Frame]]]) -> float:
    """The flow over windows decoded beforehand: all but the source's work (and the source's
    rejects, which the windows leave out: a few lines of the file at most)."""
    began = time.perf_counter()
    run_in_process(MemorySource(windows, 10.0, 1))
    return time.perf_counter() - began


def decode_seconds(path: Path, window_seconds: float = 10.0) -> tuple[float, int]:
    """decode_block over the file's lines, one block per window as the replay decodes them."""
    windows: dict[int, list[str]] = {}
    for _, line in data_lines(path):
        stamp = line_stamp(line) or 0
        windows.setdefault(stamp // int(window_seconds * 1e9), []).append(line)
    began = time.perf_counter()
    for lines in windows.values():
        decode_block(lines, carry_tags=True)
    return time.perf_counter() - began, len(windows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", default="demo")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--file-seconds", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=1, help="Runs of each; medians.")
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "capture.lp"
        lines = write_capture(path, args.scenario, args.seed, args.file_seconds)
        for _ in range(args.rounds):
            trivial, flow = trivial_seconds(path), flow_seconds(path)
            source, windows = source_seconds(path)
            decode, blocks = decode_seconds(path)
            for name, value in (
                ("trivial stateful flow (count per node)", trivial),
                ("reflex", flow),
                ("  its source alone", source),
                ("  the flow over windows decoded before", decoded_flow_seconds(windows)),
                (f"  decode_block alone ({blocks} blocks)", decode),
            ):
                seconds.setdefault(name, []).append(value)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    trivials, flows = seconds["trivial stateful flow (count per node)"], seconds["reflex"]
    decodeds = seconds["  the flow over windows decoded before"]
    rounds = f", medians of {args.rounds}" if args.rounds > 1 else ""
    print(f"{lines:,} lines of {args.scenario}, one process, in one run{rounds}:")
    for name, value in median.items():
        print(f"  {name:40} {value:6.2f} s {lines / value:>10,.0f} lines/s")
    # Ratios of each round's own runs (one sitting), then their median.
    ratio = statistics.median(t / f for t, f in zip(trivials, flows, strict=True))
    ceiling = statistics.median(t / d for t, d in zip(trivials, decodeds, strict=True))
    print(f"  ratio flow / trivial: {ratio:.3f} (the scale issue's bar: 0.5, goal 0.7)")
    print(f"  the same with a source that cost nothing: {ceiling:.3f}")


if __name__ == "__main__":
    main()
