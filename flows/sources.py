"""Partitioned, resumable Bytewax sources of telemetry windows.

A partition is a shard of nodes. Each emits one :class:`WindowBatch` per window, in time order;
its resume state is a plain cursor: the last window it emitted. Windows are aligned to the
epoch (``time_ns // window_ns``) so every source cuts the same windows from the same data.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

from reflex_localize.flows.messages import ErrorRecord, WindowBatch, shard_of
from reflex_localize.flows.stream_clock import StampCheck, median_start
from reflex_localize.schemas.codec import Point, PointError, decode
from reflex_localize.schemas.frame import Frame, frames_from_points
from reflex_localize.schemas.line_file import data_lines, line_stamp, raw_tag


def shard_names(n_shards: int) -> list[str]:
    return [f"shard-{i}" for i in range(n_shards)]


def select_shard(
    frames: list[Frame], shard: int, n_shards: int, cache: dict[str, int]
) -> list[Frame]:
    """The rows of ``frames`` whose node belongs to ``shard``."""
    if n_shards == 1:
        return frames
    out = []
    for frame in frames:
        nodes, inverse = np.unique(frame.tags["node"], return_inverse=True)
        owner = np.array([cache.setdefault(n, shard_of(n, n_shards)) for n in nodes.tolist()])
        mask = owner[inverse] == shard
        if mask.all():
            out.append(frame)
        elif mask.any():
            out.append(frame.take(mask))
    return out


class _WindowPartition(StatefulSourcePartition[WindowBatch, int]):
    """Turns an iterator of ``(window, frames, errors)`` into per-shard batches."""

    def __init__(
        self,
        windows: Iterator[tuple[int, list[Frame], list[ErrorRecord]]],
        shard: str,
        n_shards: int,
        window_ns: int,
        resume: int | None,
        errors_per_shard: bool = False,
    ) -> None:
        self._windows, self._shard, self._n = windows, shard, n_shards
        self._errors_per_shard = errors_per_shard
        self._index = int(shard.rsplit("-", 1)[1])
        self._window_ns, self._cursor = window_ns, resume if resume is not None else -1
        self._cache: dict[str, int] = {}

    def next_batch(self) -> list[WindowBatch]:
        for window, frames, errors in self._windows:
            if window <= self._cursor:
                continue  # already emitted before the restart
            self._cursor = window
            mine = select_shard(frames, self._index, self._n, self._cache)
            batch = WindowBatch(
                self._shard,
                window,
                window * self._window_ns,
                (window + 1) * self._window_ns,
                mine,
                n_shards=self._n,
            )
            # Source-level rejects are counted once: each shard's own, or all with shard 0.
            batch.errors = errors if self._errors_per_shard or self._index == 0 else []
            return [batch]
        raise StopIteration

    def snapshot(self) -> int:
        return self._cursor


class WindowedSource(FixedPartitionedSource[WindowBatch, int]):
    """A source whose partitions are node shards cut from one stream of windows; subclasses
    say where the windows come from (``_windows``)."""

    n_shards: int
    window_ns: int
    # True when ``_shard_windows`` gives each shard only its own rejects (else shard 0 has all).
    errors_per_shard = False

    def list_parts(self) -> list[str]:
        return shard_names(self.n_shards)

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> _WindowPartition:
        index = int(for_part.rsplit("-", 1)[1])
        return _WindowPartition(
            self._shard_windows(index),
            for_part,
            self.n_shards,
            self.window_ns,
            resume_state,
            self.errors_per_shard,
        )

    def _shard_windows(self, index: int) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        """The windows shard ``index`` needs; by default all of them (it selects its rows)."""
        return self._windows()

    def _windows(self) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        raise NotImplementedError


class MemorySource(WindowedSource):
    """Windows already generated in this process (the demo keeps its frames for reports)."""

    def __init__(
        self,
        windows: list[tuple[int, list[Frame]]],
        window_seconds: float = 10.0,
        n_shards: int = 1,
    ) -> None:
        self.windows, self.n_shards = windows, n_shards
        self.window_ns = int(window_seconds * 1e9)

    def _windows(self) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        for window, frames in self.windows:
            yield window, frames, []


class ChunkSource(WindowedSource):
    """Frames from a generator of chunks (the simulator's), cut into epoch-aligned windows.

    ``chunks(window_seconds)`` is called once per partition and must give every partition
    the same frames in the same order (a deterministic simulation); each partition keeps
    the rows of its own shard. The shell hands the simulator in this way, so the flow
    never imports it.
    """

    def __init__(
        self,
        chunks: Callable[[float], Iterable[list[Frame]]],
        n_shards: int = 1,
        window_seconds: float = 10.0,
    ) -> None:
        self.chunks, self.n_shards = chunks, n_shards
        self.window_ns = int(window_seconds * 1e9)

    def _windows(self) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        for frames in self.chunks(self.window_ns / 1e9):
            yield from split_windows(frames, self.window_ns)


def split_windows(
    frames: list[Frame], window_ns: int
) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
    by_window: dict[int, list[Frame]] = {}
    for frame in frames:
        if not len(frame):
            continue
        windows = frame.time_ns // window_ns
        for window in np.unique(windows).tolist():
            mask = windows == window
            by_window.setdefault(window, []).append(frame if mask.all() else frame.take(mask))
    for window in sorted(by_window):
        yield window, by_window[window], []


class LineProtocolSource(WindowedSource):
    """Replays a line-protocol file (an incident capture, or `reflex simulate --out`).

    Lines may be out of order within ``disorder_windows``; a line later than that is counted
    as late in the error stream, not silently merged into a closed window.

    The window clock follows the stream, not any one line (:mod:`flows.stream_clock`): it
    starts at the median of the first stamps; a stamp ahead of the wall clock or long before
    the stream is refused, named as a unit mistake where it is one; a line more than
    ``disorder_windows + 1`` windows ahead of the clock is held until ``jump_quorum`` lines
    agree (a real gap in the capture) or the stream goes on without it (an outlier, refused).
    Identical points (same series, same stamp) are counted as duplicates and kept once.

    Decoding is what costs, so each shard decodes only its own lines: a plain line's node is
    read off its tags without decoding (:func:`line_owner`), and the line is skipped by the
    other shards. Lines whose node cannot be read that way (escapes, no node tag) are decoded
    by every shard, which keeps their rows; their rejects are counted by shard 0 alone. Every
    shard still reads every line's timestamp, so all shards close the same windows.
    """

    errors_per_shard = True
    start_lines = 64  # stamps whose median starts the clock
    jump_quorum = 32  # held lines that confirm a jump of the stream

    def __init__(
        self,
        path: Path,
        n_shards: int = 1,
        window_seconds: float = 10.0,
        disorder_windows: int = 2,
        now_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.path, self.n_shards = Path(path), n_shards
        self.window_ns, self.disorder = int(window_seconds * 1e9), disorder_windows
        self.now_ns = now_ns

    def _windows(self) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        return self._shard_windows(-1)

    def _first_stamps(self) -> list[int]:
        stamps = []
        for _, line in data_lines(self.path):
            stamp = line_stamp(line)
            if stamp is not None:
                stamps.append(stamp)
                if len(stamps) >= self.start_lines:
                    break
        return stamps

    def _shard_windows(self, index: int) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        """Shard ``index``'s windows; -1 decodes every line (one shard for all)."""
        start = median_start(self._first_stamps())
        check = StampCheck(start, self.now_ns()) if start is not None else None
        replay = _Replay(self, index)
        if start is not None:
            replay.newest = start // self.window_ns
        held: list[tuple[int, str, int]] = []  # far-ahead lines waiting for the stream
        since_held = 0  # lines within the clock read since the first held one
        for number, line in data_lines(self.path):
            stamp = line_stamp(line)
            if stamp is not None and check is not None:
                refused = check.refusal(stamp)
                if refused is not None:
                    replay.refuse(number, line, *refused)
                    continue
                if stamp // self.window_ns > replay.newest + self.disorder + 1:
                    held.append((number, line, stamp))
                    if len(held) >= self.jump_quorum:  # the stream jumped: follow it
                        yield from replay.take_all(held)
                        held, since_held = [], 0
                    continue
                if held:
                    since_held += 1
                    if since_held > 2 * self.jump_quorum:  # the stream went on without them
                        replay.refuse_ahead(held)
                        held, since_held = [], 0
            yield from replay.take(number, line, stamp)
        if held and since_held == 0:
            yield from replay.take_all(held)  # the stream ended after a jump: follow it
        elif held:
            replay.refuse_ahead(held)
        yield from replay.finish()


class _Replay:
    """One shard's pass over a line-protocol file: its window clock, pending windows, the
    points it has seen (for duplicates) and its rejects."""

    def __init__(self, source: LineProtocolSource, index: int) -> None:
        self.source, self.index = source, index
        self.window_ns, self.disorder = source.window_ns, source.disorder
        self.pending: dict[int, list[Point]] = {}
        # window -> (series text, field names, stamp) of the points taken: a line that repeats
        # one is a duplicate (a line that adds other fields to the series is not)
        self.seen: dict[int, set[tuple[str, tuple[str, ...], int]]] = {}
        self.errors: list[ErrorRecord] = []
        self.closed = self.newest = -1
        self.owners: dict[str, int] = {}

    def _counted(self, line: str) -> tuple[int, bool]:
        """The line's owning shard (-1: shared) and whether this shard counts its rejects."""
        owner = -1
        if self.index >= 0 and self.source.n_shards > 1:
            owner = line_owner(line, self.source.n_shards, self.owners)
        return owner, (owner == self.index) or (owner < 0 and self.index <= 0)

    def reject(self, code: str, detail: str) -> None:
        self.errors.append(ErrorRecord("source", code, detail[:300]))

    def refuse(self, number: int, line: str, code: str, detail: str) -> None:
        if self._counted(line)[1]:
            self.reject(code, f"line {number}: {detail}")

    def refuse_ahead(self, held: list[tuple[int, str, int]]) -> None:
        for number, line, stamp in held:
            ahead = (stamp - (self.newest + 1) * self.window_ns) / 1e9
            detail = f"{stamp} is {ahead:,.0f} s ahead of the stream, which did not follow it"
            self.refuse(number, line, "timestamp_ahead_of_stream", detail)

    def advance(self, window: int) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        if window > self.closed:
            self.pending.setdefault(window, [])
        if window > self.newest:
            self.newest = window
            for ready in sorted(w for w in self.pending if w < self.newest - self.disorder):
                self.closed = ready
                self.seen.pop(ready, None)
                yield ready, frames_from_points(self.pending.pop(ready)), self.errors
                self.errors = []

    def take_all(
        self, held: list[tuple[int, str, int]]
    ) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        for number, line, stamp in held:
            yield from self.take(number, line, stamp)

    def take(
        self, number: int, line: str, stamp: int | None
    ) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        if stamp is not None:
            yield from self.advance(stamp // self.window_ns)
        owner, counted = self._counted(line)
        if owner >= 0 and owner != self.index:
            return  # another shard's line: only its time was needed
        try:
            point = decode(line, carry_tags=True)  # a Telegraf host tag is no reason to refuse
        except Exception as error:
            if counted:
                code = error.code if isinstance(error, PointError) else "unparseable"
                self.reject(code, f"line {number}: {error}")
            return
        if point.time_ns != stamp:
            # int() also takes "+5", "1_0" or non-ASCII digits; the other shards went by the
            # plain digits (line_stamp), so a point stamped otherwise cannot be placed the
            # same way in every shard.
            if counted:
                self.reject("timestamp_not_plain_ns", f"line {number}: {line.rsplit(' ', 1)[-1]}")
            return
        window = point.time_ns // self.window_ns
        if window <= self.closed:
            if counted:
                late = (self.closed + 1) * self.window_ns - point.time_ns
                self.reject("late", f"line {number}: {late / 1e9:,.1f} s behind the closed windows")
            return
        series = (line.partition(" ")[0], tuple(point.fields), point.time_ns)
        seen = self.seen.setdefault(window, set())
        if series in seen:
            if counted:
                self.reject("duplicate_point", f"line {number}: {series[0][:200]} at {stamp}")
            return
        seen.add(series)
        self.pending.setdefault(window, []).append(point)

    def finish(self) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        for window in sorted(self.pending):
            yield window, frames_from_points(self.pending.pop(window)), self.errors
            self.errors = []
        if self.errors:
            yield self.closed + 1, [], self.errors


def line_owner(line: str, n_shards: int, owners: dict[str, int]) -> int:
    """The shard of a line's node, read off its tags without decoding; -1 when that cannot be
    done safely (see :func:`raw_tag`), so that every shard decodes it."""
    node = raw_tag(line, "node")
    if node is None:
        return -1
    owner = owners.get(node)
    if owner is None:
        owner = owners[node] = shard_of(node, n_shards)
    return owner
