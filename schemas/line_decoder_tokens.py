"""The plain lines of a block as one run of bytes, cut into tokens and sorted into kinds with
array operations: no Python string is made per token.

A plain line (printable ASCII, no backslash, no quote: see :mod:`schemas.line_decoder`) has no
escape, so its separators (space, comma, equals sign) are exactly its bytes of those values,
and token ``j`` of a line runs from just after its separator ``j - 1`` up to its separator
``j`` (the line's ``"\\n"`` ends the last one). Lines of one *kind* share a measurement, the
same separators in the same order (the *skeleton*) and the same keys, so their values stand in
the same token columns; every line of a kind is compared with the first byte for byte.

>>> block = PlainBlock.of([f"host,node=n{i} load{i % 2}={i * 11} 5" for i in range(9)])
>>> for kind in kinds(block):
...     print(kind.names, kind.skeleton, kind.rows.tolist())
('host', 'node', 'load0') b',= = ' [0, 2, 4, 6, 8]
('host', 'node', 'load1') b',= = ' [1, 3, 5, 7]
>>> token = kinds(block)[0].token(1, 4)
>>> block.raw[token[0]:token[1]]
b'22'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from reflex_localize.schemas.line_decoder_values import PAD, windows

# Setting up a kind costs about as much as the strict decoder spends on a few lines. So a kind
# of fewer lines than this is left to it, and so are the lines of a width (count of tokens)
# past this many kinds: a block of real data has a few kinds per width, of many lines each.
SMALLEST_KIND = 4
_MOST_KINDS_PER_WIDTH = 8


# One bytes.translate pass marks (with a 1, which numpy reads as True) each separator and each
# byte a plain line may not hold (not printable ASCII, a backslash, a quote): the second are
# rare, and told from the first by their value.
_MARKS = bytes(int(b in b" ,=\n" or not 0x20 <= b <= 0x7E or b in b'\\"') for b in range(256))
_IS_SEPARATOR = np.array([b in b" ,=\n" for b in range(256)])
_PAD_TEXT = "_" * PAD  # plain, and no separator


@dataclass
class PlainBlock:
    """Lines, each ended by ``"\\n"``, between PAD plain bytes (so that a window fits
    anywhere), where their separators stand, and which lines are not plain."""

    raw: bytes
    # Positions in raw of every separator byte (and, in a line not plain, of each byte that
    # makes it so: such a line is not cut into tokens)
    separators: np.ndarray
    codes: bytes  # the bytes at those positions, in order: each line's skeleton and "\\n"
    first: np.ndarray  # per line: the index in separators of its first one
    widths: np.ndarray  # per line: its count of tokens (of separators, with the "\\n")
    starts: np.ndarray  # per line: where it starts in raw
    not_plain: np.ndarray  # the lines holding a byte that a plain line may not hold

    @classmethod
    def of(cls, lines: Sequence[str], *, quoted: bool = False) -> PlainBlock | None:
        """The block of ``lines``, or None if one holds a line break. ``quoted``: the lines
        hold quoted string values (and no quote before their first space, and quotes in
        pairs), whose separators are not separators."""
        # The front padding is joined as a line of its own: its "\\n" is no line's end.
        text = "\n".join([_PAD_TEXT, *lines, _PAD_TEXT])
        raw = text.encode("ascii") if text.isascii() else text.encode("utf-8", "surrogatepass")
        data = np.frombuffer(raw, np.uint8)
        marks = np.frombuffer(raw.translate(_MARKS), bool)
        if quoted:  # a separator after an odd count of quotes stands inside a string
            marks = marks & ((np.cumsum(data == ord('"')) & 1) == 0)
        separators = np.flatnonzero(marks)
        codes = data[separators]
        odd = ~_IS_SEPARATOR[codes]
        odd_at = separators[odd]
        if quoted:  # its quotes are no separators; elsewhere a line not plain is left alone
            separators, codes = separators[~odd], codes[~odd]
        line_ends = np.flatnonzero(codes == ord("\n"))
        if len(line_ends) != len(lines) + 1:
            return None
        first = line_ends[:-1] + 1
        not_plain = np.unique(np.searchsorted(separators[line_ends[1:]], odd_at))
        return cls(raw, separators, codes.tobytes(), first, line_ends[1:] - first + 1,
                   separators[line_ends[:-1]] + 1, not_plain)  # fmt: skip


@dataclass
class Kind:
    """Lines of one kind: ``names`` (measurement, then each key in line order) is None when
    the skeleton is not ``m(,k=v)* k=v(,k=v)* t``, a key is empty, or the lines are too few to
    be worth it: the strict decoder reads those lines."""

    rows: np.ndarray  # the lines' indices in the block
    skeleton: bytes  # the separators of each line, without its "\n"
    names: tuple[str, ...] | None
    line_starts: np.ndarray  # (rows,) where each line starts in the block's raw bytes
    # (tokens, rows) where each token ends (its separator's position): a token of every row
    # is one contiguous array
    ends: np.ndarray

    def starts(self, columns: list[int] | np.ndarray) -> np.ndarray:
        """(columns, rows) where each row's tokens of ``columns`` start."""
        columns = np.asarray(columns)
        starts = self.ends[columns - 1] + 1
        starts[columns == 0] = self.line_starts
        return starts

    def token(self, row: int, column: int) -> tuple[int, int]:
        return int(self.starts([column])[0, row]), int(self.ends[column, row])


def kinds(block: PlainBlock, rows: np.ndarray | None = None) -> list[Kind]:
    """The block's lines (those of ``rows``, in order) sorted into kinds; each is in one."""
    rows = np.arange(len(block.widths)) if rows is None else rows
    if not len(rows):
        return []
    order = rows[np.argsort(block.widths[rows], kind="stable")]
    cuts = np.flatnonzero(np.diff(block.widths[order])) + 1
    found: list[Kind] = []
    for same_width in np.split(order, cuts):
        found += _kinds_of_width(block, same_width)
    return found


def _kinds_of_width(block: PlainBlock, rows: np.ndarray) -> list[Kind]:
    """Lines of one width: the first line of those left and all lines like it, until none is
    left (nearly always once)."""
    width = int(block.widths[rows[0]])
    if rows[-1] - rows[0] + 1 == len(rows):  # one run of lines: one run of separators
        first = int(block.first[rows[0]])
        ends = block.separators[first : first + width * len(rows)].reshape(-1, width).T.copy()
    else:
        ends = block.separators[block.first[rows] + np.arange(width)[:, None]]
    kind = Kind(rows, b"", None, block.starts[rows], ends)
    skeletons = windows(block.codes, width)[block.first[rows]]
    found: list[Kind] = []
    for _ in range(_MOST_KINDS_PER_WIDTH):
        if len(kind.rows) < SMALLEST_KIND:
            break
        skeleton = bytes(skeletons[0])[:-1]
        names, same = _names(block.raw, skeleton, kind)
        same &= skeletons == skeletons[0]
        if np.count_nonzero(same) < SMALLEST_KIND:
            names = None
        if same.all():
            return [*found, Kind(kind.rows, skeleton, names, kind.line_starts, kind.ends)]
        found.append(_rows_of(kind, same, skeleton, names))
        kind, skeletons = _rows_of(kind, ~same, b"", None), skeletons[~same]
    return [*found, kind]


def _rows_of(kind: Kind, chosen: np.ndarray, skeleton: bytes, names: tuple | None) -> Kind:
    return Kind(kind.rows[chosen], skeleton, names, kind.line_starts[chosen], kind.ends[:, chosen])


def _names(raw: bytes, skeleton: bytes, kind: Kind) -> tuple[tuple[str, ...] | None, np.ndarray]:
    """The first row's measurement and keys, and which rows have the very same (all rows,
    with None, where the skeleton does not have the shape a valid line has)."""
    if not _well_formed(skeleton):
        return None, np.ones(len(kind.rows), bool)
    columns = np.array([0, *(j for j, code in enumerate(skeleton) if code == ord("="))])
    starts = kind.starts(columns)
    lengths = kind.ends[columns] - starts
    same = (lengths == lengths[:, :1]).all(0)
    if not ((lengths[:, 0] > 0) & (lengths[:, 0] <= PAD)).all():  # an empty key, or a long one
        return None, same
    template = lengths[:, 0]
    first_row = zip(starts[:, 0].tolist(), template.tolist(), strict=True)
    names = [raw[at : at + length].decode("ascii") for at, length in first_row]
    # A key is compared as a few unsigned ints that cover it (overlapping where its length is
    # no multiple of their size): numpy compares ints far faster than bytes strings.
    size = np.minimum(8, 2 ** np.floor(np.log2(template)).astype(np.int64))
    reads = -(-template // size)
    for read_size, count in set(zip(size.tolist(), reads.tolist(), strict=True)):
        chosen = np.flatnonzero((size == read_size) & (reads == count))
        offsets = np.minimum(read_size * np.arange(count), template[chosen, None] - read_size)
        spelt = _uints(raw, read_size)[starts[chosen, None, :] + offsets[:, :, None]]
        same &= (spelt == spelt[:, :, :1]).reshape(-1, len(same)).all(0)
    return tuple(names), same


def _uints(raw: bytes, size: int) -> np.ndarray:
    """Every ``size`` bytes of ``raw`` as one unsigned int, with no copy: item p at raw[p]."""
    return np.ndarray((len(raw) - size + 1,), f"<u{size}", raw, 0, (1,))


def _well_formed(skeleton: bytes) -> bool:
    """Whether the skeleton is ``m(,k=v)* k=v(,k=v)* t``."""
    head, _, rest = skeleton.partition(b" ")
    tags, odd = divmod(len(head), 2)
    fields = len(rest) // 2  # "=", then ",=" per further field, then " "
    return not odd and head == b",=" * tags and rest == b"=" + b",=" * (fields - 1) + b" "
