"""A line-protocol file cut into byte ranges, one per source partition, so that no process reads
or decodes the lines another one owns.

Range ``k`` of ``n`` starts at the first line that begins at or after ``k * size // n`` bytes
(a line is never cut) and ends where range ``k + 1`` starts; the ranges cover the file. A
range's pass reads its own lines, and for their time alone (no decoding, no rejects counted):

* the lines *before* it, from where the stream was ``windows`` windows earlier (a few reads of
  64 KB find that place), so its window clock starts where a pass over the whole file would
  stand at the range's start: the same windows closed, the same lines late;
* the lines *after* it while one of its own lines is held far ahead of the clock, so that the
  stream that follows decides the held line's fate, as it would in a whole pass.

A small file is read from its start, and so is any file whose stamps do not step back cleanly:
the clock then takes the very decisions of a whole pass.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "c.lp"
>>> _ = path.write_bytes(b"m,node=a f=1 1\\nm,node=b f=2 2\\nm,node=c f=3 3\\n")
>>> [(r.start, r.end) for r in byte_ranges(path, 3, window_ns=10, windows=3)]
[(0, 15), (15, 30), (30, 45)]
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from reflex_localize.flows.io.stream_clock import median_start
from reflex_localize.schemas.line_file import is_data, line_stamp

_SAMPLE_BYTES = 1 << 16  # read at a place to tell where the stream stands there
_FIRST_STEP = 1 << 20  # how far back a range first looks for its clock's start


@dataclass(frozen=True)
class ByteRange:
    """Range ``start:end`` of the file at ``path``, read from ``warm_from`` for the clock."""

    path: Path
    warm_from: int
    start: int
    end: int
    size: int

    def regions(self) -> list[tuple[int, int]]:
        """The byte spans read for time before the range, the range, and read for time after."""
        return [(self.warm_from, self.start), (self.start, self.end), (self.end, self.size)]

    @cached_property
    def lines_before(self) -> int:
        """Lines of the file before ``warm_from``: counted only when a reject must be numbered."""
        count, left = 0, self.warm_from
        with self.path.open("rb") as handle:
            while left > 0 and (piece := handle.read(min(left, 1 << 22))):
                count, left = count + piece.count(b"\n"), left - len(piece)
        return count


def byte_ranges(path: Path, n: int, *, window_ns: int, windows: int) -> list[ByteRange]:
    """The file cut into ``n`` ranges; each reads from ``windows`` windows back for its clock."""
    size = path.stat().st_size
    starts = [0] + [line_start(path, k * size // n) for k in range(1, n)]
    ends = [*starts[1:], size]
    return [
        ByteRange(path, warm_start(path, start, window_ns, windows), start, end, size)
        for start, end in zip(starts, ends, strict=True)
    ]


def line_start(path: Path, offset: int) -> int:
    """The first place at or after ``offset`` where a line begins (the file's size if none)."""
    if offset <= 0:
        return 0
    with path.open("rb") as handle:
        handle.seek(offset - 1)
        at = offset - 1
        while piece := handle.read(_SAMPLE_BYTES):
            found = piece.find(b"\n")
            if found >= 0:
                return at + found + 1
            at += len(piece)
    return at


def warm_start(path: Path, start: int, window_ns: int, windows: int) -> int:
    """Where a range's pass begins reading for its clock: a line at least ``windows`` windows
    (by the median of the stamps there) before the range's start, else the file's start."""
    if start == 0:
        return 0
    here = _median_window(path, start, window_ns)
    near, back = start, _FIRST_STEP  # near: the nearest place known to be too near
    while here is not None and start - back > 0:
        at = line_start(path, start - back)
        there = _median_window(path, at, window_ns)
        if there is not None and there <= here - windows:
            return _nearest_far_enough(path, at, near, here - windows, window_ns)
        near, back = at, back * 2
    return 0


def _nearest_far_enough(path: Path, far: int, near: int, window: int, window_ns: int) -> int:
    """Halves ``far:near`` a few times for a place nearer ``near`` still at or before
    ``window`` (so a range reads little more than it needs for its clock)."""
    for _ in range(6):
        middle = line_start(path, (far + near) // 2)
        if middle >= near:
            break
        there = _median_window(path, middle, window_ns)
        if there is not None and there <= window:
            far = middle
        else:
            near = middle
    return far


def _median_window(path: Path, offset: int, window_ns: int) -> int | None:
    """The window of the median stamp of the whole lines in the 64 KB at ``offset``."""
    with path.open("rb") as handle:
        handle.seek(offset)
        sample = handle.read(_SAMPLE_BYTES)
    lines = sample.decode("utf-8", "replace").split("\n")[:-1]  # the last may be cut
    stamps = [stamp for line in lines if is_data(line) and (stamp := line_stamp(line)) is not None]
    start = median_start(stamps)
    return None if start is None else start // window_ns
