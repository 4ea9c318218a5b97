"""One pass over a stream of windows for all the partitions of a source in this process.

Bytewax builds one partition per shard, and a partition of the simulator's source used to run
the whole simulation for itself and keep its shard's rows: four shards in one process ran it
four times. :class:`SharedWindows` runs the stream once per process instead: each window is
split by shard once (one ``np.unique`` of its nodes per frame), and held until every reader
made here has taken it. Worker threads of one process may share it (a lock guards the stream).
The stream is made for the shards read here, so a source may do only their work (a replay
decodes only their lines); the errors of a window go to the reader of the lowest of them.

>>> import numpy as np
>>> from reflex_localize.schemas.frame import Frame
>>> def windows(shards):
...     nodes = np.array(["a", "b", "c", "d"], dtype=object)
...     yield 5, [Frame("host", np.zeros(4, np.int64), {"node": nodes},
...                     {"load1": np.arange(4.0)})], []
>>> shared = SharedWindows(windows, n_shards=2)
>>> readers = [shared.reader(0), shared.reader(1)]
>>> [[f.tags["node"].tolist() for f in next(r)[1]] for r in readers]
[[['d']], [['a', 'b', 'c']]]
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import numpy as np

from reflex_localize.flows.messages import ErrorRecord, shard_of
from reflex_localize.schemas.frame import Frame

Windows = Iterator[tuple[int, list[Frame], list[ErrorRecord]]]
Shards = frozenset[int]


def split_by_shard(frames: list[Frame], n_shards: int, cache: dict[str, int]) -> list[list[Frame]]:
    """Each shard's rows of ``frames`` (a frame whole where all its rows are one shard's)."""
    if n_shards == 1:
        return [frames]
    out: list[list[Frame]] = [[] for _ in range(n_shards)]
    for frame in frames:
        coded = frame.tag_codes.get("node") if frame.tag_codes is not None else None
        if coded is not None:  # a node's shard looked up once per node, not once per row
            rows = _owners(coded[0].tolist(), n_shards, cache)[coded[1]]
        else:
            rows = _owners(frame.tags["node"].tolist(), n_shards, cache)
        for shard in np.unique(rows).tolist():
            mask = rows == shard
            out[shard].append(frame if mask.all() else frame.take(mask))
    return out


def _owners(nodes: list[str], n_shards: int, cache: dict[str, int]) -> np.ndarray:
    """Each row's shard, looked up by node in ``cache`` (filled for nodes new to it): a dict
    lookup per row costs a fraction of ``np.unique`` over a column of str, which sorts them
    with a Python comparison per step."""
    try:
        return np.fromiter(map(cache.__getitem__, nodes), np.int64, len(nodes))
    except KeyError:
        for node in set(nodes).difference(cache):
            cache[node] = shard_of(node, n_shards)
        return np.fromiter(map(cache.__getitem__, nodes), np.int64, len(nodes))


class SharedWindows:
    """Readers of one stream of windows, each given only its own shard's rows."""

    def __init__(self, windows: Callable[[Shards], Windows], n_shards: int) -> None:
        self._make, self._n = windows, n_shards
        self._stream: Windows | None = None
        self._held: list[tuple[int, list[list[Frame]], list[ErrorRecord]]] = []
        self._first = 0  # the stream index of _held[0]
        self._done = False
        self._cursors: dict[int, int] = {}  # reader -> the stream index it takes next
        self._shards: dict[int, int] = {}  # reader -> its shard
        self._owners: dict[str, int] = {}
        self._lock = threading.Lock()

    def reader(self, shard: int) -> Windows:
        """Shard ``shard``'s windows: ``(window, its frames, errors)``."""
        with self._lock:
            if self._first > 0 or self._stream is not None:  # others moved on: run alone
                return self._alone(shard)
            key = len(self._shards)
            self._cursors[key], self._shards[key] = 0, shard
        return self._read(key, shard)

    def _alone(self, shard: int) -> Windows:
        owners: dict[str, int] = {}
        for window, frames, errors in self._make(frozenset({shard})):
            yield window, split_by_shard(frames, self._n, owners)[shard], errors

    def _read(self, key: int, shard: int) -> Windows:
        try:
            while True:
                with self._lock:
                    item = self._take(key)
                if item is None:
                    return
                window, frames, errors = item
                yield window, frames[shard], errors if shard == min(self._shards.values()) else []
        finally:
            with self._lock:
                self._cursors.pop(key, None)
                self._trim()

    def _take(self, key: int) -> tuple[int, list[list[Frame]], list[ErrorRecord]] | None:
        at = self._cursors[key]
        while at - self._first >= len(self._held):
            if self._done:
                return None
            if self._stream is None:
                self._stream = self._make(frozenset(self._shards.values()))
            try:
                window, frames, errors = next(self._stream)
            except StopIteration:
                self._done = True
                return None
            self._held.append((window, split_by_shard(frames, self._n, self._owners), errors))
        self._cursors[key] = at + 1
        item = self._held[at - self._first]
        self._trim()
        return item

    def _trim(self) -> None:
        """Lets go of the windows every reader has taken."""
        lowest = min(self._cursors.values(), default=self._first + len(self._held))
        drop = lowest - self._first
        if drop > 0:
            del self._held[:drop]
            self._first = lowest
