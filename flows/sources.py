"""Partitioned, resumable Bytewax sources of telemetry windows.

A partition is a shard of nodes. Each emits one :class:`WindowBatch` per window, in time order;
its resume state is a plain cursor: the last window it emitted. Windows are aligned to the
epoch (``time_ns // window_ns``) so every source cuts the same windows from the same data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

from reflex_localize.flows.messages import ErrorRecord, WindowBatch, shard_of
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

    Decoding is what costs, so each shard decodes only its own lines: a plain line's node is
    read off its tags without decoding (:func:`line_owner`), and the line is skipped by the
    other shards. Lines whose node cannot be read that way (escapes, no node tag) are decoded
    by every shard, which keeps their rows; their rejects are counted by shard 0 alone. Every
    shard still reads every line's timestamp, so all shards close the same windows.
    """

    errors_per_shard = True

    def __init__(
        self, path: Path, n_shards: int = 1, window_seconds: float = 10.0, disorder_windows: int = 2
    ) -> None:
        self.path, self.n_shards = Path(path), n_shards
        self.window_ns, self.disorder = int(window_seconds * 1e9), disorder_windows

    def _windows(self) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        return self._shard_windows(-1)

    def _shard_windows(self, index: int) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        """Shard ``index``'s windows; -1 decodes every line (one shard for all).

        The window clock advances with every line's timestamp, decoded or not and whoever
        owns it, so that every shard count yields the same windows in the same order. (So a
        garbled line with a timestamp far ahead closes windows just as a good one would.)
        """
        pending: dict[int, list[Point]] = {}
        errors: list[ErrorRecord] = []
        closed = newest = -1
        owners: dict[str, int] = {}

        def advance(window: int) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
            nonlocal closed, newest, errors
            if window > closed:
                pending.setdefault(window, [])
            if window > newest:
                newest = window
                for ready in sorted(w for w in pending if w < newest - self.disorder):
                    closed = ready
                    yield ready, frames_from_points(pending.pop(ready)), errors
                    errors = []

        for number, line in data_lines(self.path):
            stamp = line_stamp(line)
            if stamp is not None:
                yield from advance(stamp // self.window_ns)
            owner = -1
            if index >= 0 and self.n_shards > 1:
                owner = line_owner(line, self.n_shards, owners)
            if owner >= 0 and owner != index:
                continue  # another shard's line: only its time was needed
            counted = owner >= 0 or index <= 0  # a shared line's rejects go to shard 0
            try:
                point = decode(line)
            except Exception as error:
                if counted:
                    reason = error.reason if isinstance(error, PointError) else "unparseable"
                    detail = f"line {number}: {error}"[:300]
                    errors.append(ErrorRecord("source", reason, detail))
                continue
            if point.time_ns != stamp:
                # int() also takes "+5", "1_0" or non-ASCII digits; the other shards went by
                # the plain digits (line_stamp), so a point stamped otherwise cannot be placed
                # the same way in every shard.
                if counted:
                    bad = "timestamp not in plain decimal nanoseconds"
                    errors.append(ErrorRecord("source", bad, f"line {number}"))
                continue
            window = point.time_ns // self.window_ns
            if window <= closed:
                if counted:
                    late = "late point beyond the disorder allowance"
                    errors.append(ErrorRecord("source", late, f"line {number}"))
                continue
            pending.setdefault(window, []).append(point)
        for window in sorted(pending):
            yield window, frames_from_points(pending.pop(window)), errors
            errors = []
        if errors:
            yield closed + 1, [], errors


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
