"""A line-protocol replay whose partitions are byte ranges of the file, not shards of nodes.

Each partition reads and decodes only its own range (:mod:`flows.io.byte_ranges`), every
node's lines, and sends each window it closes as one piece per shard
(:mod:`flows.io.window_pieces`); the flow puts a shard's pieces back together before its shard
step. Splitting the replay between processes so adds no work: a line is read, split and decoded
by one process alone. (A replay partitioned by shard, :class:`~flows.io.sources.LineProtocolSource`,
has every process read every line, and decode its own.)

The windows, rows and rejects are those of a pass over the whole file
(``tests/test_line_protocol_ranges.py``); the one difference is where a reject is counted: with
the window its range closed it in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

from reflex_localize.flows.io.byte_ranges import ByteRange, byte_ranges, warm_start
from reflex_localize.flows.io.shared_windows import split_by_shard
from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.io.window_pieces import WindowPiece
from reflex_localize.flows.messages import ErrorRecord, WindowBatch
from reflex_localize.schemas.frame import Frame

Windows = Iterator[tuple[int, list[Frame], list[ErrorRecord]]]
# The last window sent, the pieces sent, the range's bytes and the count of ranges: a replay
# resumed over a file that has grown since reads the same ranges (the last one to the new end);
# one resumed with another count of ranges starts them afresh (the assembly drops what it sent).
Cursor = tuple[int, int, int, int, int]


class LineProtocolRanges(FixedPartitionedSource[WindowPiece, Cursor]):
    """Replays a line-protocol file as :class:`LineProtocolSource` does, in ``n_ranges``
    partitions of its bytes; give as many as the flow has workers (``reflex flow`` does).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "c.lp"
    >>> _ = path.write_text("host,node=a load1=1 1700000000000000000\\n")
    >>> LineProtocolRanges(path, n_shards=4, n_ranges=2).list_parts()
    ['bytes-0000', 'bytes-0001']
    """

    emits_pieces = True  # the flow assembles the shards' windows (flows/localize.py)

    def __init__(
        self,
        path: Path,
        n_shards: int = 1,
        window_seconds: float = 10.0,
        n_ranges: int = 1,
        disorder_windows: int = 2,
        now_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.replay = LineProtocolSource(path, n_shards, window_seconds, disorder_windows, now_ns)
        self.n_shards, self.n_ranges = n_shards, n_ranges
        self._ranges: list[ByteRange] | None = None

    def list_parts(self) -> list[str]:
        # Zero-padded, so the sorted order Bytewax deals partitions out in is the file's order.
        return [f"bytes-{k:04d}" for k in range(self.n_ranges)]

    def ranges(self) -> list[ByteRange]:
        if self._ranges is None:
            replay = self.replay
            windows = replay.disorder + 2  # it closes windows disorder + 1 behind its newest
            self._ranges = byte_ranges(replay.path, self.n_ranges, window_ns=replay.window_ns,
                                       windows=windows)  # fmt: skip
        return self._ranges

    def build_part(
        self, step_id: str, for_part: str, resume_state: Cursor | None
    ) -> RangePartition:
        index = int(for_part.rsplit("-", 1)[1])
        if resume_state is not None and resume_state[4] != self.n_ranges:
            resume_state = None
        span = self.ranges()[index] if resume_state is None else self._resumed(index, resume_state)
        windows = self.replay._pass(None, span)
        return RangePartition(windows, index, self.n_ranges, self.n_shards,
                              self.replay.window_ns, resume_state, span)  # fmt: skip

    def _resumed(self, index: int, cursor: Cursor) -> ByteRange:
        """The range a resumed partition read before: its bytes, the last one's to the end."""
        replay, (_, _, start, end, _) = self.replay, cursor
        size = replay.path.stat().st_size
        end = size if index == self.n_ranges - 1 else min(end, size)
        warm_from = warm_start(replay.path, start, replay.window_ns, replay.disorder + 2)
        return ByteRange(replay.path, warm_from, start, end, size)


class RangePartition(StatefulSourcePartition[WindowPiece, Cursor]):
    """A byte range's windows, each cut into one piece per shard; resumes after its last."""

    def __init__(
        self,
        windows: Windows,
        part: int,
        parts: int,
        n_shards: int,
        window_ns: int,
        resume: Cursor | None,
        span: ByteRange,
    ) -> None:
        self._windows, self._part, self._parts = windows, part, parts
        self._n, self._window_ns, self._span = n_shards, window_ns, span
        self._cursor, self._seq = (resume[0], resume[1]) if resume is not None else (-1, 0)
        self._since = self._seq
        self._done = False
        self._owners: dict[str, int] = {}

    def next_batch(self) -> list[WindowPiece]:
        if self._done:
            raise StopIteration
        for window, frames, errors in self._windows:
            if window <= self._cursor:
                continue  # already sent before the restart
            self._cursor = window
            return self._pieces(window, split_by_shard(frames, self._n, self._owners), errors)
        self._done = True
        return self._pieces(-1, [[] for _ in range(self._n)], [], done=True)

    def _pieces(
        self, window: int, frames: list[list[Frame]], errors: list[ErrorRecord], done: bool = False
    ) -> list[WindowPiece]:
        start, end = window * self._window_ns, (window + 1) * self._window_ns
        batches = [
            WindowBatch(
                f"shard-{shard}",
                window,
                start,
                end,
                frames[shard],
                errors if shard == 0 else [],
                n_shards=self._n,
            )
            for shard in range(self._n)
        ]
        self._seq += 1
        seq = self._seq - 1
        return [WindowPiece(b, self._part, self._parts, seq, done, self._since) for b in batches]

    def snapshot(self) -> Cursor:
        return self._cursor, self._seq, self._span.start, self._span.end, self._parts
