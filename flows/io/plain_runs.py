"""Runs of plain lines in a piece of a replayed file, taken a run at a time.

A replay spent more time on its per-line loop (read the stamp, check the clock, file the line
in its window) than on decoding. Nearly every line of a capture is plain: its stamp is ASCII
digits, it falls in an open window the clock has reached, and its measurement is Reflex's (so
it waits for its window's block decode). :class:`PlainRuns` reads a piece's stamps with array
operations (:class:`schemas.line_file.PieceLines`) and finds where such a run ends; the
replay files the run's lines with a few list extends, and takes every other line one at a
time as before: a line of a foreign measurement (translated in line order, one at a time)
ends a run. A pass for some shards (one process's) reads the node of a run's lines as the
line-at-a-time loop does (:func:`flows.sources.line_owner`) and files only its own.

The run is exactly the lines the per-line loop would have queued: a stamp read here is the
one :func:`~schemas.line_file.line_stamp` reads, and the bounds are the stamp check's
(:meth:`flows.stream_clock.StampCheck.bounds`) rounded inwards to whole nanoseconds, which
integer stamps compare with as they compare with the float bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from reflex_localize.schemas.foreign_mapping import ForeignMapping
from reflex_localize.schemas.line_file import Bytes, PieceLines

_NO_WINDOW = np.iinfo(np.int64).min  # outside every clock: the line goes the long way
_FIRST_LOOK = 256  # lines checked at first for the run's end; the look grows fourfold


class _Clock(Protocol):
    closed: int  # the last window closed
    newest: int  # the newest window the clock has reached


class PlainRuns:
    """The windows of a piece's lines, ``_NO_WINDOW`` where a line must go the long way."""

    def __init__(
        self, clock: _Clock, low_ns: int, high_ns: int, window_ns: int, mapping: ForeignMapping
    ) -> None:
        self._clock, self._low, self._high, self._window_ns = clock, low_ns, high_ns, window_ns
        self._foreign = mapping.names()  # any DCGM_FI_* metric is foreign too
        self.stamps = np.empty(0, np.int64)
        self.windows: np.ndarray | None = None

    def read(self, lines: Sequence[str], raw: Bytes) -> None:
        """Takes the next piece: ``lines``, and ``raw``, their bytes (see
        :func:`schemas.line_file.data_pieces`)."""
        piece = PieceLines.of(lines, raw)
        stamps = piece.plain_stamps()
        trusted = (stamps >= 0) & (stamps >= self._low) & (stamps <= self._high)
        # A foreign measurement's line (as the translator reads it) goes the long way.
        trusted &= ~piece.measured_as(self._foreign)
        self.stamps = stamps
        self.windows = np.where(trusted, stamps // self._window_ns, _NO_WINDOW)

    def end(self, at: int) -> int:
        """Where the run of lines from ``at`` ends (``at`` itself when it is not in one)."""
        windows = self.windows
        if windows is None:
            return at
        closed, newest = self._clock.closed, self._clock.newest
        if not closed < windows[at] <= newest:
            return at
        start, look = at + 1, _FIRST_LOOK
        while start < len(windows):
            part = windows[start : start + look]
            outside = np.flatnonzero((part <= closed) | (part > newest))
            if len(outside):
                return start + int(outside[0])
            start, look = start + look, look * 4
        return len(windows)
