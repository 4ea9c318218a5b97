"""The localization flow over a line-protocol file against the yardstick the scale issue set:
a trivial stateful Bytewax flow over the same file (key each line on its node tag, count per
node). Both run in this process with ``run_main``, one after the other, so the ratio is of
one sitting on one machine. A third line times the block decoder alone
(:func:`schemas.line_decoder.decode_block`) over the same file, a window's lines a block.

    .venv/bin/python benchmarks/replay_vs_trivial.py [--scenario demo] [--file-seconds 400]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import bytewax.operators as op
from bytewax.connectors.files import FileSource
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, run_main

from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.runner import run_in_process
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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "capture.lp"
        lines = write_capture(path, args.scenario, args.seed, args.file_seconds)
        trivial, flow = trivial_seconds(path), flow_seconds(path)
        decode, blocks = decode_seconds(path)
    print(f"{lines:,} lines of {args.scenario}, one process, in one run:")
    for name, seconds in (("trivial stateful flow (count per node)", trivial), ("reflex", flow)):
        print(f"  {name:40} {seconds:6.1f} s {lines / seconds:>10,.0f} lines/s")
    print(f"  ratio flow / trivial: {trivial / flow:.3f} (the scale issue's target: 0.35)")
    print(
        f"  {f'decode_block alone ({blocks} blocks)':40} {decode:6.1f} s "
        f"{lines / decode:>10,.0f} lines/s"
    )


if __name__ == "__main__":
    main()
