"""Many lines of line protocol to columnar frames at once, exactly as the strict decoder would.

:func:`~schemas.codec.decode` parses one line into a Point, which is right for one line and far
too slow for a replay of millions. :func:`decode_block` takes a whole block of lines instead:

* it vouches only for lines whose separators are exactly their bytes of those values: *plain*
  lines (printable ASCII without backslash or quote), and lines whose quotes pair up after the
  head (string values; a separator between a pair is not one). The whole block is one run of
  bytes: its separators are found by one ``bytes.translate`` and numpy
  (:mod:`schemas.line_decoder_tokens`), lines are sorted into kinds (same measurement,
  separators and keys, compared byte for byte), and every value column of every kind is read
  with array operations, a type at a time (:mod:`schemas.line_decoder_values`); no Python
  object is made per token, and one str per distinct tag value;
* every line it cannot vouch for (escapes, quotes, a value of the wrong type, a missing tag, an
  undeclared name, a float written as ``5i``...) goes to the strict decoder, so the rejects and
  their reasons are the strict decoder's own;
* the frames are those :func:`~schemas.frame.frames_from_points` makes of the strict decoder's
  points, in the same order, row for row (``tests/test_line_decoder.py`` holds it to that).

>>> block = decode_block(["host,cluster=c,node=n1 load1=0.5,procs_running=3i 5",
...                       "host,cluster=c,node=n2 load1=2,procs_running=1i 5",
...                       "host,cluster=c,node=n3 load1=x 5"], carry_tags=True)
>>> [f.measurement for f in block.frames], block.frames[0].fields["load1"].tolist()
(['host'], [0.5, 2.0])
>>> [(position, error.code) for position, error in block.rejects]
[(2, 'bad_value')]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from reflex_localize.schemas.codec import MAX_LINE_CHARS, MAX_TIME_NS, Point, decode
from reflex_localize.schemas.contract import MeasurementSpec, Schema, load_schema
from reflex_localize.schemas.frame import Frame, frames_from_points
from reflex_localize.schemas.line_decoder_compiled import compiled_available, compiled_parts
from reflex_localize.schemas.line_decoder_tokens import Kind, PlainBlock, kinds
from reflex_localize.schemas.line_decoder_values import (
    PAD,
    read_bools,
    read_numbers,
    read_strings,
    read_tag_column,
)

Key = tuple[str, tuple[str, ...], tuple[str, ...]]  # measurement, tag names, field names
# A large block is read a piece at a time, so that a piece's arrays stay in the CPU's caches:
# 454k lines in blocks of 45k took 1.37 s whole and 0.81 s in pieces (blocks of 11k: 0.81 s
# either way). Much smaller pieces would pay the fixed cost of each kind more often.
_PIECE_LINES = 6000


@dataclass
class DecodedBlock:
    """Frames of the accepted lines, and each rejected line's position with its error.

    ``positions[i]`` holds, for each row of ``frames[i]``, the index of its line in the block.
    An error is the strict decoder's own: a PointError, or (as the strict decoder can raise
    them on absurd input) another exception, which callers count as unparseable."""

    frames: list[Frame] = field(default_factory=list)
    positions: list[np.ndarray] = field(default_factory=list)
    rejects: list[tuple[int, Exception]] = field(default_factory=list)
    # Per frame: True where the decoder found that no two rows share their tags and stamp (a
    # replay then need not look for repeated lines); False where it did not look.
    unrepeated: list[bool] = field(default_factory=list)


@dataclass
class FramePart:
    """Rows of one frame key, with their positions: :func:`assemble` sorts them into place."""

    key: Key
    positions: np.ndarray
    frame: Frame
    repeats: bool | None = None  # whether two rows share tags and stamp; None: not looked at

    @classmethod
    def of(cls, frame: Frame, positions: np.ndarray) -> FramePart:
        return cls((frame.measurement, tuple(frame.tags), tuple(frame.fields)), positions, frame)


def decode_block(
    lines: Sequence[str],
    schema: Schema | None = None,
    *,
    carry_tags: bool = False,
    stamps: np.ndarray | None = None,
) -> DecodedBlock:
    """Decodes ``lines`` (no trailing newline needed) as ``codec.decode`` decodes each.

    ``stamps``, where the caller has read them already, are the lines' timestamps as
    :func:`~schemas.line_file.line_stamp` reads them (-1 where it read none): a line of the
    fast path ends with its stamp's plain digits, so they are its time, read once."""
    schema = schema or load_schema()
    if compiled_available():
        parts, strict = _compiled_parts(lines, schema, carry_tags, stamps)
    else:
        parts, strict = _numpy_parts(lines, schema, carry_tags, stamps)
    block = DecodedBlock()
    strict_points: list[tuple[int, Point]] = []
    for position in sorted(strict):
        try:
            strict_points.append((position, decode(lines[position], schema, carry_tags=carry_tags)))
        except Exception as error:  # the strict decoder's verdict, whatever it is
            block.rejects.append((position, error))
    parts += points_parts(strict_points, schema)
    block.frames, block.positions = assemble(parts)
    block.unrepeated = _unrepeated(parts, block.frames)
    return block


def _unrepeated(parts: list[FramePart], frames: list[Frame]) -> list[bool]:
    """Per frame, whether it is one part that was found to repeat no row."""
    by_key: dict[Key, list[FramePart]] = {}
    for part in parts:
        by_key.setdefault(part.key, []).append(part)
    found = []
    for frame in frames:
        members = by_key[(frame.measurement, tuple(frame.tags), tuple(frame.fields))]
        found.append(len(members) == 1 and members[0].repeats is False)
    return found


def _compiled_parts(
    lines: Sequence[str], schema: Schema, carry_tags: bool, stamps: np.ndarray | None
) -> tuple[list[FramePart], set[int]]:
    """The compiled path's parts of the plain lines and the numpy path's of the others; the
    positions left to the strict decoder. (It reads each line's stamp itself, as its digits.)"""
    found, strict_at, other = compiled_parts(lines, schema, carry_tags)
    parts = [FramePart(key, positions, frame, repeats) for key, positions, frame, repeats in found]
    strict = set(strict_at.tolist())
    if len(other):
        others = other.tolist()
        other_stamps = None if stamps is None else stamps[other]
        more, more_strict = _numpy_parts(
            [lines[p] for p in others], schema, carry_tags, other_stamps
        )
        parts += [FramePart(part.key, other[part.positions], part.frame) for part in more]
        strict.update(others[p] for p in more_strict)
    return parts, strict


def _numpy_parts(
    lines: Sequence[str], schema: Schema, carry_tags: bool, stamps: np.ndarray | None
) -> tuple[list[FramePart], set[int]]:
    """The numpy path's parts, a piece of lines at a time; the positions left to the strict
    decoder."""
    strict: set[int] = set()
    parts: list[FramePart] = []
    size = -(-len(lines) // -(-len(lines) // _PIECE_LINES)) if lines else 1  # pieces alike
    for begin in range(0, len(lines), size):
        piece_strict: set[int] = set()
        piece_stamps = None if stamps is None else stamps[begin : begin + size]
        piece = _fast_parts(
            lines[begin : begin + size], schema, carry_tags, piece_strict, piece_stamps
        )
        parts += [FramePart(part.key, part.positions + begin, part.frame) for part in piece]
        strict.update(begin + position for position in piece_strict)
    return parts, strict


def points_parts(numbered: list[tuple[int, Point]], schema: Schema) -> list[FramePart]:
    """Decoded points (with their positions) as parts, grouped as ``frames_from_points``."""
    groups: dict[Key, list[tuple[int, Point]]] = {}
    for position, point in numbered:
        key = (point.measurement, tuple(point.tags), tuple(point.fields))
        groups.setdefault(key, []).append((position, point))
    return [
        FramePart(key, np.array([p for p, _ in members], np.int64),
              frames_from_points([point for _, point in members], schema)[0])
        for key, members in groups.items()
    ]  # fmt: skip


def assemble(parts: list[FramePart]) -> tuple[list[Frame], list[np.ndarray]]:
    """One frame per key, keys in order of their first line, rows in line order: what
    ``frames_from_points`` makes of the points in line order."""
    by_key: dict[Key, list[FramePart]] = {}
    for part in sorted(parts, key=lambda p: int(p.positions[0])):
        by_key.setdefault(part.key, []).append(part)
    frames, positions = [], []
    for members in by_key.values():
        if len(members) == 1:
            frames.append(members[0].frame)
            positions.append(members[0].positions)
            continue
        where = np.concatenate([m.positions for m in members])
        order = np.argsort(where, kind="stable")
        first = members[0].frame
        frames.append(
            Frame(
                first.measurement,
                np.concatenate([m.frame.time_ns for m in members])[order],
                {k: np.concatenate([m.frame.tags[k] for m in members])[order] for k in first.tags},
                {
                    k: np.concatenate([m.frame.fields[k] for m in members])[order]
                    for k in first.fields
                },
            )
        )
        positions.append(where[order])
    return frames, positions


def _fast_parts(
    lines: Sequence[str],
    schema: Schema,
    carry_tags: bool,
    strict: set[int],
    stamps: np.ndarray | None = None,
) -> list[FramePart]:
    """Parts of the lines the fast path vouches for; the others are added to ``strict``."""
    where = np.arange(len(lines))
    block = PlainBlock.of(lines)
    if block is None or _longest_line_bytes(block) > MAX_LINE_CHARS:
        # A line holds a line break of its own, or may be too long (the strict decoder's to
        # refuse): its bytes are past the limit, and its characters may be too.
        strict.update(p for p, line in enumerate(lines)
                      if "\n" in line or len(line) > MAX_LINE_CHARS)  # fmt: skip
        where = np.array([p for p in range(len(lines)) if p not in strict], np.int64)
        block = PlainBlock.of([lines[p] for p in where.tolist()])
    if block is None or not len(where):
        return []
    quoted, plain = [], np.ones(len(where), bool)
    for row in block.not_plain.tolist():
        plain[row] = False
        if _quoted_plain(lines[where[row]]):
            quoted.append(row)
        else:
            strict.add(int(where[row]))
    batch = _Batch(stamps)
    readings = _readings(block, np.flatnonzero(plain), where, batch, strict, schema, carry_tags)
    if quoted:
        strings = PlainBlock.of([lines[where[row]] for row in quoted], quoted=True)
        assert strings is not None  # the lines were in a block already
        readings += _readings(strings, None, where[quoted], batch, strict, schema, carry_tags)
    batch.read()
    parts = [reading.part(strict) for reading in readings]
    return [part for part in parts if part is not None]


def _longest_line_bytes(block: PlainBlock) -> int:
    """The most bytes a line of the block has: no fewer than its characters, and read off
    where the lines start (the longest in characters, ``max(map(len, lines))``, cost a Python
    call per line)."""
    after_last = len(block.raw) - PAD  # just after the "\n" that ends the last line
    return int(np.diff(block.starts, append=after_last).max(initial=1)) - 1


def _quoted_plain(line: str) -> bool:
    """Whether the fast path can cut the line as the strict decoder does though it has quotes:
    printable ASCII with no backslash, none of its quotes before its first space (there they
    are plain characters), and quotes in pairs (else the strict decoder refuses it)."""
    return (
        line.isascii() and line.isprintable() and "\\" not in line
        and line.count('"') % 2 == 0 and 0 <= line.find(" ") < line.find('"')
    )  # fmt: skip


def _readings(
    block: PlainBlock,
    rows: np.ndarray | None,
    where: np.ndarray,
    batch: _Batch,
    strict: set[int],
    schema: Schema,
    carry_tags: bool,
) -> list[_Reading]:
    """A reading of each kind of ``rows`` (line ``r`` of the block is line ``where[r]`` of the
    caller's) whose keys the fast path may take; the lines of the others go to ``strict``."""
    readings = []
    for kind in kinds(block, rows):
        spec = schema.measurements.get(kind.names[0]) if kind.names else None
        if kind.names is None or spec is None or not _declared(kind, spec, carry_tags):
            strict.update(where[kind.rows].tolist())
            continue
        readings.append(_Reading(block.raw, kind, spec, where[kind.rows], batch))
    return readings


def _declared(kind: Kind, spec: MeasurementSpec, carry_tags: bool) -> bool:
    assert kind.names is not None
    tags = kind.skeleton.partition(b" ")[0].count(b",")
    return spec.takes_keys(kind.names[1 : 1 + tags], kind.names[1 + tags :], carry_tags)


class _Batch:
    """Value columns of every kind of a block, read one type at a time: a few array operations
    per block rather than per column; the times from the caller's stamps where it has them."""

    def __init__(self, stamps: np.ndarray | None = None) -> None:
        self.stamps = stamps
        self.asked: dict[tuple[int, str], list[tuple[bytes, np.ndarray, np.ndarray]]] = {}
        self.answers: dict[tuple[int, str], list[tuple[np.ndarray, np.ndarray]]] = {}

    def ask(self, raw: bytes, kind: str, starts: np.ndarray, ends: np.ndarray) -> tuple:
        """Asks for a (rows, columns) matrix of tokens of ``raw`` read as ``kind`` (a field
        type or "time"); returns the ticket that :meth:`answer` takes once :meth:`read` ran."""
        asked = self.asked.setdefault((id(raw), kind), [])
        asked.append((raw, starts, ends))
        return (id(raw), kind), len(asked) - 1

    def read(self) -> None:
        for key, asked in self.asked.items():
            raw, kind = asked[0][0], key[1]
            starts = np.concatenate([s.ravel() for _, s, _ in asked])
            ends = np.concatenate([e.ravel() for _, _, e in asked])
            if kind == "bool":
                values, ok = read_bools(raw, starts, ends)
            elif kind == "string":
                values, ok = read_strings(raw, starts, ends)
            else:
                values, ok = read_numbers(raw, starts, ends, kind)
            cuts = np.cumsum([s.size for _, s, _ in asked])[:-1]
            self.answers[key] = [
                (v.reshape(s.shape), o.reshape(s.shape))
                for v, o, (_, s, _) in zip(np.split(values, cuts), np.split(ok, cuts), asked,
                                           strict=True)
            ]  # fmt: skip

    def answer(self, ticket: tuple) -> tuple[np.ndarray, np.ndarray]:
        return self.answers[ticket[0]][ticket[1]]


class _Reading:
    """One kind of lines on its way to a frame: its value columns asked of the batch."""

    def __init__(
        self, raw: bytes, kind: Kind, spec: MeasurementSpec, where: np.ndarray, batch: _Batch
    ) -> None:
        assert kind.names is not None
        self.raw, self.kind, self.spec, self.where, self.batch = raw, kind, spec, where, batch
        self.tags = kind.skeleton.partition(b" ")[0].count(b",")
        self.by_type: dict[str, list[int]] = {}  # field type -> indices into the fields
        for index, name in enumerate(kind.names[1 + self.tags :]):
            self.by_type.setdefault(spec.fields[name].type, []).append(index)
        self.tickets = {
            field_type: batch.ask(raw, field_type,
                                  *self._columns([2 + 2 * (self.tags + i) for i in indices]))
            for field_type, indices in self.by_type.items()
        }  # fmt: skip
        self.time_ticket = (
            None if batch.stamps is not None else batch.ask(raw, "time", *self._columns([-1]))
        )

    def _columns(self, columns: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Where the tokens of ``columns`` start and end, a column to a row: each column's
        values come out contiguous, and rows are checked by reducing across columns."""
        at = np.array(columns) % len(self.kind.ends)
        return self.kind.starts(at), self.kind.ends[at]

    def part(self, strict: set[int]) -> FramePart | None:
        """The rows whose every value reads as the strict decoder reads it; the other rows
        are added to ``strict``."""
        names = self.kind.names
        assert names is not None
        good = np.ones(len(self.where), bool)
        tag_columns = {}
        for i, name in enumerate(names[1 : 1 + self.tags]):
            starts, ends = self.kind.ends[1 + 2 * i] + 1, self.kind.ends[2 + 2 * i]
            column, ok = read_tag_column(self.raw, starts, ends)
            tag_columns[name] = column
            good &= ok & (ends > starts)  # an empty tag: the strict decoder says why
        columns: dict[int, np.ndarray] = {}
        for field_type, indices in self.by_type.items():
            values, ok = self.batch.answer(self.tickets[field_type])
            good &= ok.all(0)
            columns.update({index: values[j] for j, index in enumerate(indices)})
        if self.time_ticket is None:  # the stamps the caller read (-1: none, strict decoder)
            assert self.batch.stamps is not None
            times = self.batch.stamps[self.where][None, :]
            good &= (times[0] >= 0) & (times[0] <= MAX_TIME_NS)
        else:
            times, ok = self.batch.answer(self.time_ticket)
            good &= ok[0]
        fields = {name: columns[i] for i, name in enumerate(names[1 + self.tags :])}
        frame = Frame(self.spec.name, times[0], tag_columns, fields)
        if good.all():
            return FramePart.of(frame, self.where)
        strict.update(self.where[~good].tolist())
        return FramePart.of(frame.take(good), self.where[good]) if good.any() else None
