"""Windows read in pieces by byte range, put back together per shard inside Bytewax.

A replay split by byte range (:mod:`flows.io.byte_ranges`) has each partition decode only its
own lines, every node's: it cuts each window it closes into one :class:`WindowPiece` per shard,
keyed like the shard step, so Bytewax carries each piece to the worker of its shard. There
:class:`PieceAssembly` holds the pieces until every range has passed the window (a range never
sends a window at or before one it has sent), and hands the shard step the whole window: the
ranges' rows in file order, as a pass over the whole file gives them.

A piece carries its range's sequence number, so pieces that arrive out of turn wait for the
ones before them: a range's progress is read only from its pieces in the order sent.

>>> import numpy as np
>>> from reflex_localize.schemas.frame import Frame
>>> def piece(part, seq, window, value, done=False):
...     frame = Frame("host", np.zeros(1, np.int64), {"node": np.array(["a"], object)},
...                   {"load1": np.array([value])})
...     batch = WindowBatch("shard-0", window, 0, 10, [] if done else [frame])
...     return WindowPiece(batch, part, 2, seq, done)
>>> assembly = PieceAssembly()
>>> assembly.take(piece(1, 0, 5, 2.0))  # range 0 has not passed window 5 yet
[]
>>> [(b.window, b.frames[0].fields["load1"].tolist())  # range 1 has passed 5: it is whole
...  for b in assembly.take(piece(0, 0, 5, 1.0))]
[(5, [1.0, 2.0])]
>>> assembly.take(piece(0, 1, -1, 0.0, done=True)), assembly.take(piece(1, 1, -1, 0.0, True))
([], [])
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from bytewax.operators import StatefulLogic

from reflex_localize.flows.messages import WindowBatch
from reflex_localize.schemas.line_decoder import FramePart, assemble

_PART, _FRAME = 1 << 48, 1 << 32  # a row's place: its range, its frame there, its row there


@dataclass
class WindowPiece:
    """One shard's rows of one window from one byte range (``done``: the range has ended)."""

    batch: WindowBatch
    part: int
    parts: int
    seq: int  # the range's count of windows sent before this one
    done: bool = False
    since: int = 0  # the range's first piece since it (re)started: where a new assembly begins

    @property
    def end_ns(self) -> int:  # what the flow's metrics read of a polled item
        return self.batch.end_ns


@dataclass
class PieceAssembly:
    """What a shard holds of the windows in pieces: a plain state, pickled at snapshots."""

    next_seq: dict[int, int] = field(default_factory=dict)  # range -> the piece it sends next
    early: dict[tuple[int, int], WindowPiece] = field(default_factory=dict)  # out of turn
    passed: dict[int, float] = field(default_factory=dict)  # range -> the last window it sent
    waiting: dict[int, list[tuple[int, WindowBatch]]] = field(default_factory=dict)
    parts: int = 0
    released: float = -1  # the last window handed on

    def take(self, piece: WindowPiece) -> list[WindowBatch]:
        """Files ``piece``; returns the windows every range has now passed, whole, in order."""
        if piece.parts != self.parts:
            # Resumed with another count of ranges: those start afresh from the file's start,
            # so what the old ones left waiting is sent again (and what was handed on, dropped).
            self.next_seq, self.early, self.passed, self.waiting = {}, {}, {}, {}
            self.parts = piece.parts
        self.early[(piece.part, piece.seq)] = piece
        part = piece.part
        self.next_seq.setdefault(part, piece.since)
        while (turn := self.early.pop((part, self.next_seq[part]), None)) is not None:
            self.next_seq[part] = turn.seq + 1
            if turn.done:
                self.passed[part] = float("inf")
                continue
            self.passed[part] = turn.batch.window
            if turn.batch.window > self.released:  # (a resumed range may send it again)
                self.waiting.setdefault(turn.batch.window, []).append((part, turn.batch))
        if len(self.passed) < self.parts:
            return []  # a range that has sent nothing yet may still send any window
        return self._release(min(self.passed.values()))

    def copy(self) -> PieceAssembly:
        """A snapshot: the containers copied, the pieces shared (nothing changes a piece once
        taken). A deep copy cost a Python call per tag value of every row waiting, at every
        epoch, and a range's rows wait until the ranges before it have passed them."""
        return PieceAssembly(
            dict(self.next_seq),
            dict(self.early),
            dict(self.passed),
            {window: list(pieces) for window, pieces in self.waiting.items()},
            self.parts,
            self.released,
        )

    def flush(self) -> list[WindowBatch]:
        """Every window held (at the end of input)."""
        return self._release(float("inf"))

    def _release(self, horizon: float) -> list[WindowBatch]:
        ready = sorted(window for window in self.waiting if window <= horizon)
        if ready:
            self.released = ready[-1]
        return [whole(self.waiting.pop(window)) for window in ready]


def whole(pieces: list[tuple[int, WindowBatch]]) -> WindowBatch:
    """A window's pieces as one batch: rows in range order, then in their order in the range
    (each range's frames hold its rows in file order, one frame per kind)."""
    pieces.sort(key=lambda item: item[0])
    first = pieces[0][1]
    if len(pieces) == 1:
        return first
    parts = [
        FramePart.of(frame, part * _PART + index * _FRAME + np.arange(len(frame)))
        for part, batch in pieces
        for index, frame in enumerate(batch.frames)
        if len(frame)
    ]
    frames = assemble(parts)[0] if parts else []
    errors = [error for _, batch in pieces for error in batch.errors]
    return WindowBatch(first.shard, first.window, first.start_ns, first.end_ns, frames, errors,
                       n_shards=first.n_shards)  # fmt: skip


class AssemblyLogic(StatefulLogic[WindowPiece, WindowBatch, PieceAssembly]):
    """The Bytewax step that holds a shard's pieces until their window is whole."""

    def __init__(self, state: PieceAssembly | None) -> None:
        self.state = state or PieceAssembly()

    def on_item(self, value: WindowPiece) -> tuple[list[WindowBatch], bool]:
        return self.state.take(value), StatefulLogic.RETAIN

    def on_eof(self) -> tuple[list[WindowBatch], bool]:
        return self.state.flush(), StatefulLogic.RETAIN

    def snapshot(self) -> PieceAssembly:
        return self.state.copy()
