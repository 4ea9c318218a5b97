"""Many lines of line protocol to columnar frames at once, exactly as the strict decoder would.

:func:`~schemas.codec.decode` parses one line into a Point, which is right for one line and far
too slow for a replay of millions. :func:`decode_block` takes a whole block of lines instead:

* it vouches only for *plain* lines: printable ASCII without backslash or quote, exactly two
  spaces, every pair ``key=value``; these are split into tokens by ``str.split`` on the whole
  block, grouped by measurement and by the line's skeleton (its separators, read with one
  ``bytes.translate``), and each group's values are converted a column at a time;
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

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from reflex_localize.schemas.codec import MAX_TIME_NS, Point, decode
from reflex_localize.schemas.contract import MeasurementSpec, Schema, load_schema
from reflex_localize.schemas.frame import Frame, frames_from_points

# Printable ASCII but backslash and quote: no escape can hide a separator in such a line.
_PLAIN = bytes(b for b in range(0x20, 0x7F) if b not in b'\\"')
_NOT_PLAIN = re.compile(r'[^\x20-\x7e\n]|[\\"]')
_NOT_SEPARATOR = bytes(b for b in range(256) if b not in b" ,=\n")
# The words the strict decoder reads as booleans (codec._parse_value).
_BOOLS = {w: True for w in ("t", "T", "true", "True", "TRUE")} | {
    w: False for w in ("f", "F", "false", "False", "FALSE")
}

Key = tuple[str, tuple[str, ...], tuple[str, ...]]  # measurement, tag names, field names


@dataclass
class DecodedBlock:
    """Frames of the accepted lines, and each rejected line's position with its error.

    ``positions[i]`` holds, for each row of ``frames[i]``, the index of its line in the block.
    An error is the strict decoder's own: a PointError, or (as the strict decoder can raise
    them on absurd input) another exception, which callers count as unparseable."""

    frames: list[Frame] = field(default_factory=list)
    positions: list[np.ndarray] = field(default_factory=list)
    rejects: list[tuple[int, Exception]] = field(default_factory=list)


@dataclass
class FramePart:
    """Rows of one frame key, with their positions: :func:`assemble` sorts them into place."""

    key: Key
    positions: np.ndarray
    frame: Frame

    @classmethod
    def of(cls, frame: Frame, positions: np.ndarray) -> FramePart:
        return cls((frame.measurement, tuple(frame.tags), tuple(frame.fields)), positions, frame)


def decode_block(
    lines: Sequence[str], schema: Schema | None = None, *, carry_tags: bool = False
) -> DecodedBlock:
    """Decodes ``lines`` (no trailing newline needed) as ``codec.decode`` decodes each."""
    schema = schema or load_schema()
    plain, strict = _split_plain(lines)
    parts: list[FramePart] = []
    if plain:
        parts += _fast_parts(lines, plain, schema, carry_tags, strict)
    block = DecodedBlock()
    strict_points: list[tuple[int, Point]] = []
    for position in sorted(strict):
        try:
            strict_points.append((position, decode(lines[position], schema, carry_tags=carry_tags)))
        except Exception as error:  # the strict decoder's verdict, whatever it is
            block.rejects.append((position, error))
    parts += points_parts(strict_points, schema)
    block.frames, block.positions = assemble(parts)
    return block


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


def _split_plain(lines: Sequence[str]) -> tuple[list[int], set[int]]:
    """Positions of the lines the fast path may try, and of those only the strict decoder may."""
    text = "\n".join(lines)
    breaks_between_lines = text.count("\n") == len(lines) - 1
    quotes_at_most = False  # only quotes and backslashes can make a line not plain
    if text.isascii() and breaks_between_lines:
        odd = text.encode("ascii").translate(None, _PLAIN + b"\n")
        if not odd:
            return list(range(len(lines))), set()
        quotes_at_most = not odd.translate(None, b'"\\')
    # Some line is not plain: find which from the few characters that make it so.
    ends = np.cumsum([len(line) + 1 for line in lines])
    strict = {position for position, line in enumerate(lines) if not line}
    if not breaks_between_lines:  # a line holds a line break of its own
        strict |= {position for position, line in enumerate(lines) if "\n" in line}
    for at in _quotes(text) if quotes_at_most else (m.start() for m in _NOT_PLAIN.finditer(text)):
        strict.add(int(np.searchsorted(ends, at, side="right")))
    return [p for p in range(len(lines)) if p not in strict], strict


def _quotes(text: str) -> Iterator[int]:
    """Where quotes and backslashes stand in ``text``: ``str.find`` skips the rest at C speed."""
    for char in '"\\':
        at = text.find(char)
        while at >= 0:
            yield at
            at = text.find(char, at + 1)


def _fast_parts(
    lines: Sequence[str], plain: list[int], schema: Schema, carry_tags: bool, strict: set[int]
) -> list[FramePart]:
    """Parts of the plain lines the fast path vouches for; the others are added to ``strict``."""
    chosen = [lines[p] for p in plain]
    text = "\n".join(chosen)
    skeletons = text.encode("ascii").translate(None, _NOT_SEPARATOR).split(b"\n")
    tokens = text.replace(" ", ",").replace("=", ",").replace("\n", ",").split(",")
    counts = np.fromiter(map(len, skeletons), np.int64, len(skeletons)) + 1
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    parts = []
    measurements = np.array([tokens[start] for start in starts.tolist()], dtype=object)
    everything: np.ndarray | None = None  # all tokens as an array, for a group not in one run
    for (measurement, skeleton), rows in _groups(measurements, skeletons).items():
        layout = _layout(skeleton)
        spec = schema.measurements.get(measurement)
        if layout is None or spec is None:
            strict.update(plain[i] for i in rows.tolist())
            continue
        width = len(skeleton) + 1
        if rows[-1] - rows[0] + 1 == len(rows):  # one run of lines: one slice of the tokens
            first = int(starts[rows[0]])
            run = tokens[first : first + len(rows) * width]
            matrix = np.array(run, dtype=object).reshape(len(rows), width)
        else:
            if everything is None:
                everything = np.array(tokens, dtype=object)
            matrix = everything[starts[rows][:, None] + np.arange(width)]
        where = np.array(plain, np.int64)[rows]
        for keys, subset in _by_names(matrix, layout).items():
            part = _columns(matrix[subset], where[subset], keys, layout, spec, carry_tags, strict)
            if part is not None:
                parts.append(part)
    return parts


def _groups(
    measurements: np.ndarray, skeletons: list[bytes]
) -> dict[tuple[str, bytes], np.ndarray]:
    """Line indices by measurement and skeleton. A capture holds long runs of one kind of line
    (a frame's rows), so runs are found with array compares and only runs are visited."""
    shapes = np.array(skeletons, dtype=object)
    change = (measurements[1:] != measurements[:-1]) | (shapes[1:] != shapes[:-1])
    bounds = [0, *(np.flatnonzero(change) + 1).tolist(), len(skeletons)]
    runs: dict[tuple[str, bytes], list[np.ndarray]] = {}
    for start, end in pairwise(bounds):
        runs.setdefault((measurements[start], skeletons[start]), []).append(np.arange(start, end))
    return {key: np.concatenate(members) for key, members in runs.items()}


def _layout(skeleton: bytes) -> tuple[int, int] | None:
    """``(tags, fields)`` counts when the skeleton is ``m(,k=v)* k=v(,k=v)* t``, else None."""
    head, _, rest = skeleton.partition(b" ")
    tags, odd = divmod(len(head), 2)
    if odd or head != b",=" * tags or not rest.endswith(b" "):
        return None
    fields = len(rest) // 2  # "=", then ",=" per further field, then " "
    if rest != b"=" + b",=" * (fields - 1) + b" ":
        return None
    return tags, fields


def _by_names(matrix: np.ndarray, layout: tuple[int, int]) -> dict[tuple[str, ...], np.ndarray]:
    """Rows grouped by their tag and field names (nearly always one group)."""
    tags, fields = layout
    name_columns = [1 + 2 * i for i in range(tags + fields)]
    names = matrix[:, name_columns]
    first = tuple(names[0].tolist())
    if all(names[:, j].tolist().count(name) == len(names) for j, name in enumerate(first)):
        return {first: np.arange(len(matrix))}
    groups: dict[tuple[str, ...], list[int]] = {}
    for row, key in enumerate(map(tuple, names.tolist())):
        groups.setdefault(key, []).append(row)
    return {key: np.array(rows, np.int64) for key, rows in groups.items()}


def _columns(
    matrix: np.ndarray,
    where: np.ndarray,
    names: tuple[str, ...],
    layout: tuple[int, int],
    spec: MeasurementSpec,
    carry_tags: bool,
    strict: set[int],
) -> FramePart | None:
    """The part of rows whose names all obey the schema and whose values all convert as the
    strict decoder converts them; every other row is left to the strict decoder."""
    tags, fields = layout
    tag_names, field_names = names[:tags], names[tags:]
    if (
        len(set(tag_names)) != tags
        or len(set(field_names)) != fields
        or not set(spec.tags) <= set(tag_names)
        or not (carry_tags or set(tag_names) <= set(spec.tags))
        or not all(name in spec.fields and spec.fields[name].type != "string"
                   for name in field_names)
    ):  # fmt: skip
        strict.update(where.tolist())
        return None
    good = np.ones(len(matrix), bool)
    tag_columns = {}
    for i, name in enumerate(tag_names):
        column = matrix[:, 2 + 2 * i]
        good &= column != ""  # an empty tag value: the strict decoder says why
        tag_columns[name] = column
    field_columns = {}
    for i, name in enumerate(field_names):
        values, ok = _convert(matrix[:, 2 + 2 * (tags + i)], spec.fields[name].type)
        field_columns[name], good = values, good & ok
    times, ok = _convert(matrix[:, -1], "time")
    good &= ok
    if not good.all():
        strict.update(where[~good].tolist())
        if not good.any():
            return None
    frame = Frame(spec.name, times, tag_columns, field_columns)
    return FramePart.of(frame.take(good), where[good])


def _convert(column: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """A column of value tokens as the strict decoder reads a field of type ``kind`` (or the
    timestamp), and which rows it could read so (the others go to the strict decoder)."""
    n = len(column)
    tokens: list[str] = column.tolist() if kind != "float" else []
    try:
        if kind == "float":
            # float() on each str: the strict decoder's own reading of a float; what it refuses
            # ("5i", a boolean word, garbage) the strict decoder reads or refuses itself.
            values = column.astype(np.float64)
            return values, np.isfinite(values)
        if kind == "int":
            joined = "\n".join(tokens) + "\n"
            if joined.count("i\n") == n:  # every token ends in "i": one strip for all
                body = joined.replace("i\n", "\n").split("\n")[:-1]
                return np.fromiter(map(int, body), np.int64, n), np.ones(n, bool)
        elif kind == "time":
            values = np.fromiter(map(int, tokens), np.int64, n)
            return values, (values >= 0) & (values <= MAX_TIME_NS)
        elif kind == "bool":
            read = [_BOOLS.get(token) for token in tokens]
            if None not in read:
                return np.array(read, bool), np.ones(n, bool)
    except (ValueError, TypeError, OverflowError):
        pass
    return _convert_each(tokens or column.tolist(), kind)


def _convert_each(tokens: list[str], kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Token by token, for a column that holds something the column-wide reading refused."""
    dtype = {"float": np.float64, "int": np.int64, "time": np.int64, "bool": np.bool_}[kind]
    values: np.ndarray = np.zeros(len(tokens), dtype)
    ok = np.zeros(len(tokens), bool)
    for row, token in enumerate(tokens):
        value = _read_one(token, kind)
        if value is not None:
            values[row], ok[row] = value, True
    return values, ok


def _read_one(token: str, kind: str) -> float | int | bool | None:
    """One token as the strict decoder would accept it for ``kind``, or None."""
    try:
        if kind == "float":
            value = float(token)
            return value if np.isfinite(value) else None
        if kind == "bool":
            return _BOOLS.get(token)
        if kind == "int" and token[-1:] in ("i", "u"):
            number = int(token[:-1])
        elif kind == "time":
            number = int(token)
        else:
            return None
    except ValueError:
        return None
    low = 0 if kind == "time" else -(2**63)
    high = MAX_TIME_NS if kind == "time" else 2**63 - 1
    return number if low <= number <= high else None
