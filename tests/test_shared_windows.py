"""The partitions of a chunk source in one process share one pass over the chunks (one run of
the simulation, not one per shard), and each still gets exactly its own shard's rows."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

from reflex_localize.flows.io.sources import ChunkSource, select_shard, split_windows
from reflex_localize.flows.runner import run_in_process
from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator import Simulation, load_scenario

CHUNKS = 6  # a minute of fault_xid79


class CountingChunks:
    def __init__(self) -> None:
        self.passes = 0
        self.asked: list[Callable[[str], bool] | None] = []

    def __call__(
        self, seconds: float, nodes: Callable[[str], bool] | None = None
    ) -> Iterator[list[Frame]]:
        self.passes += 1
        self.asked.append(nodes)
        sim = Simulation(load_scenario("fault_xid79"), seed=7)
        return itertools.islice(sim.chunks(seconds, nodes), CHUNKS)


def drained(source: ChunkSource) -> list[list[tuple[int, list[Frame]]]]:
    parts = [source.build_part("in", name, None) for name in source.list_parts()]
    out = []
    for part in parts:  # one after the other: the first holds windows for the others
        batches = []
        while True:
            try:
                batches += [(b.window, b.frames) for b in part.next_batch()]
            except StopIteration:
                break
        out.append(batches)
    return out


def as_rows(frames: list[Frame]) -> list[tuple]:
    return [(f.measurement, tuple(f.tags), len(f), f.time_ns.tolist()) for f in frames]


def test_each_partition_gets_its_shard_from_one_pass() -> None:
    chunks = CountingChunks()
    shards = drained(ChunkSource(chunks, n_shards=3))
    assert chunks.passes == 1
    alone = [
        (window, frames)
        for chunk in CountingChunks()(10.0)
        for window, frames, _ in split_windows(chunk, 10 * 10**9)
    ]
    for index, batches in enumerate(shards):
        assert [w for w, _ in batches] == [w for w, _ in alone]
        for (_, ours), (_, frames) in zip(batches, alone, strict=True):
            assert as_rows(ours) == as_rows(select_shard(frames, index, 3, {}))
    assert sum(len(f) for b in shards for _, fs in b for f in fs) == sum(
        len(f) for _, fs in alone for f in fs
    )


def test_a_flow_of_three_shards_runs_the_chunks_once() -> None:
    chunks = CountingChunks()
    result = run_in_process(ChunkSource(chunks, n_shards=3))
    assert chunks.passes == 1 and result.point_counts["reflex_score"] > 0


def test_a_process_with_some_shards_asks_for_only_their_nodes() -> None:
    """Another process owns shard 1: this one's pass asks the chunks for shards 0 and 2 only,
    and each of its partitions still gets exactly the rows a full pass would give it."""
    chunks = CountingChunks()
    source = ChunkSource(chunks, n_shards=3)
    parts = [source.build_part("in", name, None) for name in ("shard-0", "shard-2")]
    batches: dict[int, list] = {0: [], 2: []}
    for index, part in zip((0, 2), parts, strict=True):
        while True:
            try:
                batches[index] += [(b.window, b.frames) for b in part.next_batch()]
            except StopIteration:
                break
    nodes = chunks.asked[0]
    assert chunks.passes == 1 and nodes is not None
    owned = {n for n in (f"node-{i:03d}" for i in range(64)) if nodes(n)}
    assert owned and len(owned) < 64
    alone = [
        (window, frames)
        for chunk in CountingChunks()(10.0)
        for window, frames, _ in split_windows(chunk, 10 * 10**9)
    ]
    for index in (0, 2):
        assert [w for w, _ in batches[index]] == [w for w, _ in alone]
        for (_, ours), (_, frames) in zip(batches[index], alone, strict=True):
            assert as_rows(ours) == as_rows(select_shard(frames, index, 3, {}))
