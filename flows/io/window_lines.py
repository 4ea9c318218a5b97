"""An open window's lines, in the order a replay took them, held as spans of the pieces' bytes.

A replay takes nearly every line in a run of a piece (:mod:`flows.io.plain_runs`) and hands
it, once its window closes, to the block decoder, which reads plain lines as bytes
(:mod:`schemas.line_decoder_compiled`). Holding a run as the piece's bytes and where its lines
start and end makes no str per line: a line is read as str only when something asks for it (a
reject's text, a repeat's head, a line the compiled path hands back). Lines taken one at a
time (the line-at-a-time loop, foreign lines' neighbours) are kept as the str they came as.

>>> from reflex_localize.schemas.line_file import Bytes, PieceText
>>> piece = PieceText.of(b"m f=1 5\\nm f=2 5\\nm f=3 5")
>>> lines = WindowLines()
>>> lines.extend_rows(piece, np.array([0, 2]))
>>> lines.append("m f=4 5")
>>> len(lines), lines[1], lines[-1], list(lines)[:1]
(3, 'm f=3 5', 'm f=4 5', ['m f=1 5'])
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np

from reflex_localize.schemas.line_file import Bytes, PieceText


class WindowLines(Sequence[str]):
    """A window's lines: spans of pieces (each a :class:`PieceText` of some of a piece's
    lines) and lists of str, one after another."""

    def __init__(self) -> None:
        self._chunks: list[PieceText | list[str]] = []
        self._firsts: list[int] = []  # each chunk's first line's index
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def append(self, line: str) -> None:
        last = self._chunks[-1] if self._chunks else None
        if isinstance(last, list):
            last.append(line)
        else:
            self._add([line])
            return
        self._count += 1

    def extend_run(self, piece: PieceText | Sequence[str], at: int, end: int) -> None:
        """Lines ``at:end`` of a piece."""
        if isinstance(piece, PieceText):
            self._add(PieceText(piece.raw, piece.starts[at:end], piece.ends[at:end]))
        else:
            self._add(list(piece[at:end]))

    def extend_rows(self, piece: PieceText | Sequence[str], rows: np.ndarray) -> None:
        """The lines of a piece at ``rows``, in that order."""
        if not len(rows):
            return
        if isinstance(piece, PieceText):
            self._add(PieceText(piece.raw, piece.starts[rows], piece.ends[rows]))
        else:
            self._add([piece[row] for row in rows.tolist()])

    def prepend(self, lines: list[str]) -> None:
        """Puts ``lines`` before the others."""
        if lines:
            self._chunks.insert(0, list(lines))
            self._count += len(lines)
            self._renumber()

    def spans(self) -> tuple[list[Bytes], np.ndarray, np.ndarray, np.ndarray]:
        """``(raws, which, starts, ends)``: line ``p`` is ``raws[which[p]][starts[p]:ends[p]]``
        (a line held as str is encoded: UTF-8, surrogates passed, as the decoder reads it)."""
        raws: list[Bytes] = []
        index: dict[int, int] = {}
        which, starts, ends = [], [], []
        for chunk in self._chunks:
            if isinstance(chunk, PieceText):
                number = index.setdefault(id(chunk.raw), len(raws))
                if number == len(raws):
                    raws.append(chunk.raw)
                which.append(np.full(len(chunk), number, np.int32))
                starts.append(chunk.starts)
                ends.append(chunk.ends)
                continue
            encoded = [line.encode("utf-8", "surrogatepass") for line in chunk]
            lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
            raws.append(b"".join(encoded))
            which.append(np.full(len(chunk), len(raws) - 1, np.int32))
            chunk_ends = np.cumsum(lengths)
            starts.append(chunk_ends - lengths)
            ends.append(chunk_ends)
        if not which:
            empty = np.zeros(0, np.int64)
            return [], np.zeros(0, np.int32), empty, empty
        return raws, np.concatenate(which), np.concatenate(starts), np.concatenate(ends)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("window line index out of range")
        number = bisect.bisect_right(self._firsts, index) - 1
        chunk, row = self._chunks[number], index - self._firsts[number]
        return chunk[row]

    def __iter__(self) -> Iterator[str]:
        for chunk in self._chunks:
            yield from chunk

    def _add(self, chunk: PieceText | list[str]) -> None:
        self._firsts.append(self._count)
        self._chunks.append(chunk)
        self._count += len(chunk)

    def _renumber(self) -> None:
        self._firsts, count = [], 0
        for chunk in self._chunks:
            self._firsts.append(count)
            count += len(chunk)
