"""A line-protocol replay split by byte range reads and decodes each line in one partition
alone, yet gives what a pass over the whole file gives: the same windows in the same order,
the same rows, the same rejects; and, through real Bytewax runs of 1, 2 and 4 processes, the
same localization events."""

from __future__ import annotations

import copy
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from fuzz_support import fuzz_input
from test_line_protocol_shards import rows, simulated_lines
from xid79_capture import xid79_chunks

from reflex_localize.flows.io import byte_ranges
from reflex_localize.flows.io.range_replay import LineProtocolRanges
from reflex_localize.flows.io.sinks import read_events
from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.io.window_pieces import PieceAssembly
from reflex_localize.flows.messages import ErrorRecord, WindowBatch
from reflex_localize.flows.runner import run_in_process
from reflex_localize.schemas.frame import Frame
from reflex_localize.schemas.line_file import line_stamp

WINDOW_S = 10.0
CLI = [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()", "flow"]
Windows = list[tuple[int, list[Frame], list[ErrorRecord]]]


def whole_pass(path: Path, n_shards: int) -> list[Windows]:
    source = LineProtocolSource(path, n_shards, WINDOW_S)
    source.piece_chars = 4096
    shards = []
    for name in source.list_parts():
        part = source.build_part("in", name, None)
        batches: Windows = []
        while True:
            try:
                batches += [(b.window, b.frames, b.errors) for b in part.next_batch()]
            except StopIteration:
                break
        shards.append(batches)
    return shards


def ranged(path: Path, n_shards: int, n_ranges: int) -> list[Windows]:
    """Every shard's windows through the ranges' partitions, taken in turn as one Bytewax
    worker polls them, and put back together as the flow's assembly step does."""
    source = LineProtocolRanges(path, n_shards, WINDOW_S, n_ranges)
    source.replay.piece_chars = 4096
    parts = [source.build_part("in", name, None) for name in source.list_parts()]
    assemblies = [PieceAssembly() for _ in range(n_shards)]
    out: list[list[WindowBatch]] = [[] for _ in range(n_shards)]
    while parts:
        for part in list(parts):
            try:
                pieces = part.next_batch()
            except StopIteration:
                parts.remove(part)
                continue
            for piece in reversed(pieces):  # any order of arrival
                shard = int(piece.batch.shard.rsplit("-", 1)[1])
                out[shard] += assemblies[shard].take(piece)
    for shard, assembly in enumerate(assemblies):
        out[shard] += assembly.flush()
    return [[(b.window, b.frames, b.errors) for b in batches] for batches in out]


def assert_ranges_give_the_whole_pass(path: Path, n_shards: int, n_ranges: int) -> None:
    whole, split = whole_pass(path, n_shards), ranged(path, n_shards, n_ranges)
    for one, other in zip(whole, split, strict=True):
        assert [w for w, _, _ in other] == [w for w, _, _ in one]
        for (_, frames, _), (_, their, _) in zip(one, other, strict=True):
            assert rows(their) == rows(frames)
    total = sum((rows(f) for batches in whole for _, f, _ in batches), Counter())
    assert sum(total.values()) > 0

    def rejects(shards: list[Windows]) -> Counter[str]:
        return Counter(f"{e.reason}|{e.detail}" for b in shards for _, _, errs in b for e in errs)

    assert rejects(split) == rejects(whole)


@pytest.fixture(params=["far back", "near"])
def lookback(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A range's clock set from the file's start, or from a few KB back (as a large file's)."""
    if request.param == "near":
        monkeypatch.setattr(byte_ranges, "_FIRST_STEP", 4096)
        monkeypatch.setattr(byte_ranges, "_SAMPLE_BYTES", 4096)


@pytest.mark.parametrize("n_ranges", [1, 2, 4])
def test_clean_capture_in_ranges(tmp_path: Path, n_ranges: int, lookback: None) -> None:
    path = tmp_path / "capture.lp"
    path.write_text("\n".join(simulated_lines(60)) + "\n")
    assert_ranges_give_the_whole_pass(path, 3, n_ranges)


@pytest.mark.parametrize("n_ranges", [2, 4, 7])
def test_garbled_late_and_far_ahead_lines_in_ranges(tmp_path: Path, n_ranges: int) -> None:
    lines = simulated_lines(40)
    rng = random.Random(5)
    mixed = list(lines)
    for _ in range(1_500):  # garbled copies of real lines, anywhere in the file
        mixed.insert(rng.randrange(len(mixed)), fuzz_input(rng, lines[:200]))
    for at in sorted(rng.sample(range(len(mixed)), 40), reverse=True):
        stamp = next((s for s in map(line_stamp, reversed(mixed[:at])) if s is not None), None)
        if stamp is None:
            continue
        odd = rng.choice([-60, -3600, 3600, 10**6])  # late, far behind, far ahead, a jump
        mixed.insert(at, f"host,cluster=c1,node=odd{at} load1=0.5 {stamp + odd * 10**9}")
        mixed.insert(at, mixed[at + 1])  # a repeated line: a duplicate
    path = tmp_path / "mixed.lp"
    path.write_text("\n".join(mixed) + "\n")
    assert_ranges_give_the_whole_pass(path, 3, n_ranges)


def test_events_in_one_process_from_ranges(tmp_path: Path) -> None:
    path = tmp_path / "capture.lp"
    path.write_text("\n".join(simulated_lines(400)) + "\n")
    whole = run_in_process(LineProtocolSource(path, 4, WINDOW_S))
    assert whole.events
    for n_ranges in (2, 4):
        split = run_in_process(LineProtocolRanges(path, 4, WINDOW_S, n_ranges))
        assert [e.to_json() for e in split.events] == [e.to_json() for e in whole.events]
        assert split.error_counts == whole.error_counts


@pytest.mark.slow
def test_one_two_and_four_processes_replaying_by_range_find_the_same_events(
    tmp_path: Path,
) -> None:
    """Real Bytewax clusters (`reflex flow -p N` reads the file in N ranges) against the flow
    in this process over the whole file, partitioned by shard as before."""
    capture = tmp_path / "capture.lp"
    capture.write_text("".join(line + "\n" for chunk in xid79_chunks(360) for line in chunk))
    whole = run_in_process(LineProtocolSource(capture, 4, WINDOW_S))
    assert whole.events, "the XID 79 must be localized"
    expected = [e.to_json() for e in whole.events]
    for processes in (1, 2, 4):
        out = tmp_path / f"p{processes}"
        command = [*CLI, "--source", f"file:{capture}", "--sink", "files", "--out", str(out)]
        command += ["--no-recovery", "--shards", "4", "--cluster", "sim", "-p", str(processes)]
        done = subprocess.run(command, capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        assert [e.to_json() for e in read_events(out / "events.jsonl")] == expected, processes


@pytest.mark.parametrize("n_ranges", [1, 3])
def test_a_resumed_replay_by_range_sends_each_window_once_whole(
    tmp_path: Path, n_ranges: int
) -> None:
    """Stopped after a few windows (sources' cursors and assemblies snapshotted together, as
    Bytewax does), then resumed over the same file grown by more of the capture: each shard gets
    every window once, whole, as one pass over the grown file gives it."""
    lines = simulated_lines(60)
    path = tmp_path / "capture.lp"
    path.write_text("\n".join(lines[: len(lines) * 2 // 3]) + "\n")
    source = LineProtocolRanges(path, 2, WINDOW_S, n_ranges)
    parts = {name: source.build_part("in", name, None) for name in source.list_parts()}
    assemblies = [PieceAssembly() for _ in range(2)]
    got: list[list[WindowBatch]] = [[], []]

    def feed(pieces: list) -> None:
        for piece in pieces:
            shard = int(piece.batch.shard.rsplit("-", 1)[1])
            got[shard] += assemblies[shard].take(piece)

    for _ in range(3):
        for part in parts.values():
            feed(part.next_batch())
    cursors = {name: part.snapshot() for name, part in parts.items()}
    assemblies = [copy.deepcopy(a) for a in assemblies]
    path.write_text("\n".join(lines) + "\n")  # the capture goes on
    source = LineProtocolRanges(path, 2, WINDOW_S, n_ranges)
    resumed = [source.build_part("in", name, cursors[name]) for name in source.list_parts()]
    while resumed:
        for part in list(resumed):
            try:
                feed(part.next_batch())
            except StopIteration:
                resumed.remove(part)
    for shard, assembly in enumerate(assemblies):
        got[shard] += assembly.flush()
    whole = whole_pass(path, 2)
    for shard in range(2):
        assert [b.window for b in got[shard]] == [w for w, _, _ in whole[shard]]
        for batch, (_, frames, _) in zip(got[shard], whole[shard], strict=True):
            assert rows(batch.frames) == rows(frames)
