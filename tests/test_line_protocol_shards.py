"""A line-protocol replay split over shards decodes each line once, yet gives exactly what one
shard gives: the same windows in the same order, the same rows, the same rejects."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from fuzz_support import fuzz_input

from reflex_localize.flows.io.sources import LineProtocolSource, line_owner
from reflex_localize.flows.messages import ErrorRecord
from reflex_localize.schemas.frame import Frame
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.schemas.line_file import line_stamp
from reflex_localize.simulator import Simulation, load_scenario

WINDOW_S = 10.0
Row = tuple[str, int, tuple[tuple[str, str], ...], tuple[tuple[str, object], ...]]


def simulated_lines(seconds: int) -> list[str]:
    sim = Simulation(load_scenario("fault_xid79"), seed=7)
    lines: list[str] = []
    for number, chunk in enumerate(sim.chunks(10.0)):
        if number * 10 >= seconds:
            break
        lines += [line for frame in chunk for line in encode_frame(frame)]
    return lines


def replay(
    path: Path, n_shards: int, apart: bool = False
) -> list[list[tuple[int, list[Frame], list[ErrorRecord]]]]:
    """Every shard's batches, through the partitions Bytewax would build: all in one process
    (one shared pass), or ``apart``, each shard in a process of its own."""
    source = LineProtocolSource(path, n_shards, WINDOW_S)
    names = source.list_parts()
    parts = [
        (LineProtocolSource(path, n_shards, WINDOW_S) if apart else source).build_part(
            "in", name, None
        )
        for name in names
    ]
    shards = []
    for part in parts:
        batches = []
        while True:
            try:
                batches += [(b.window, b.frames, b.errors) for b in part.next_batch()]
            except StopIteration:
                break
        shards.append(batches)
    return shards


def rows(frames: list[Frame]) -> Counter[Row]:
    out: Counter[Row] = Counter()
    for frame in frames:
        for point in frame.points():
            tags = tuple(sorted((k, str(v)) for k, v in point.tags.items()))
            fields = tuple(sorted(point.fields.items()))
            out[(point.measurement, point.time_ns, tags, fields)] += 1
    return out


def assert_same_as_one_shard(path: Path, n_shards: int) -> None:
    assert_split_exactly(path, n_shards, apart=False)
    assert_split_exactly(path, n_shards, apart=True)


def assert_split_exactly(path: Path, n_shards: int, apart: bool) -> None:
    (single,) = replay(path, 1)
    shards = replay(path, n_shards, apart)
    for batches in shards:
        assert [window for window, _, _ in batches] == [window for window, _, _ in single]
    together: Counter[Row] = Counter()
    for batches in shards:
        for _, frames, _ in batches:
            together += rows(frames)
    alone: Counter[Row] = Counter()
    for _, frames, _ in single:
        alone += rows(frames)
    assert together == alone and sum(alone.values()) > 0

    def rejects(batches: list[tuple[int, list[Frame], list[ErrorRecord]]]) -> Counter[str]:
        return Counter(f"{e.reason}|{e.detail}" for _, _, errors in batches for e in errors)

    assert sum((rejects(b) for b in shards), Counter()) == rejects(single)


@pytest.mark.parametrize("n_shards", [2, 3, 5])
def test_clean_capture_splits_exactly(tmp_path: Path, n_shards: int) -> None:
    path = tmp_path / "capture.lp"
    path.write_text("\n".join(simulated_lines(60)) + "\n")
    assert_same_as_one_shard(path, n_shards)


def test_garbled_escaped_and_late_lines_split_exactly(tmp_path: Path) -> None:
    lines = simulated_lines(40)
    rng = random.Random(3)
    mixed = list(lines)
    for _ in range(2_000):  # garbled copies of real lines, anywhere in the file
        mixed.insert(rng.randrange(len(mixed)), fuzz_input(rng, lines[:200]))
    # Odd lines in the middle of the file, stamped like their neighbours (so not late), and
    # one far behind (late). Each line's node decides its shard only when it can be read off.
    at = len(mixed) // 2
    stamp = next(s for s in map(line_stamp, reversed(mixed[:at])) if s is not None)
    special = [
        f"host,cluster=c1,node=odd\\ node load1=0.5 {stamp}",  # escaped: every shard decodes
        f'host,cluster=c1,node=n"q load1=0.5 {stamp}',  # a quote before the fields: the same
        f"host,cluster=c1 load1=0.5 {stamp}",  # no node tag: rejected, once
        f"host,cluster=c1,node=n1,node=n2 load1=0.5 {stamp}",  # two: refused, once
        f"host,cluster=c1,node=late load1=0.5 {stamp - 3600 * 10**9}",  # far behind: late
        "host,cluster=c1,node=n9 load1=0.5",  # no timestamp: rejected, once
    ]
    mixed[at:at] = special
    path = tmp_path / "mixed.lp"
    path.write_text("\n".join(mixed) + "\n")
    (single,) = replay(path, 1)
    kept = {str(node) for _, frames, _ in single for f in frames for node in f.tags["node"]}
    assert {"odd node", 'n"q'} <= kept and "n2" not in kept  # the odd lines landed as rows
    assert_same_as_one_shard(path, 3)


def test_a_plain_lines_owner_is_read_without_decoding() -> None:
    owners: dict[str, int] = {}
    assert line_owner("gpu,cluster=c,node=n7,gpu=0 x=1 5", 4, owners) >= 0
    assert owners and list(owners) == ["n7"]
    assert line_owner("gpu,cluster=c,node=n\\ 7 x=1 5", 4, owners) == -1
    assert line_owner("gpu,cluster=c x=1 5", 4, owners) == -1
    assert line_owner("gpu,cluster=c,node= x=1 5", 4, owners) == -1
    assert line_owner("gpu,cluster=c,node=a,node=b x=1 5", 4, owners) == -1
    assert line_stamp("gpu,node=n x=1 1700000000000000000\n") == 1_700_000_000_000_000_000
    assert line_stamp("gpu,node=n x=1") is None
