"""Reading line-protocol files: the one reader that replays (the flow's source) and reports
share.

Decoding a line (:func:`schemas.codec.decode`) is what costs, so a reader first looks at the
raw text: a line's timestamp and a tag of its head can be read without decoding, which lets
it skip the lines it does not need. Whatever these quick reads cannot answer safely they
leave to the decoder (they answer ``None``), so the two never disagree about a line they
both read.

>>> lines = ["gpu,cluster=c,node=n7,gpu=0 power_watts=1 1700000000000000000",
...          "gpu,cluster=c,node=n\\\\ 7,gpu=0 power_watts=1 1700000000000000000"]
>>> [raw_tag(line, "node") for line in lines], line_stamp(lines[0])
(['n7', None], 1700000000000000000)
"""

from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import overload

import numpy as np

from reflex_localize.schemas.codec import MAX_LINE_CHARS
from reflex_localize.schemas.line_decoder_compiled import plain_lines
from reflex_localize.schemas.line_decoder_values import byte_matrix

_MAX_STAMP_DIGITS = len(str(1 << 63))
_STAMP_WINDOW = _MAX_STAMP_DIGITS + 1  # the longest stamp that can be plain, and a space
_POW10_U64 = np.array([10**p for p in range(_STAMP_WINDOW - 1, -1, -1)], np.uint64)


def data_lines(path: Path, piece_bytes: int = 1 << 22) -> Iterator[tuple[int, str]]:
    """``(line number, text without its newline)`` of each line of the file at ``path`` that
    holds data: blank lines and ``#`` comments are skipped, numbers count every line. Bytes
    that are not UTF-8 are replaced, so the decoder rejects that line rather than the read
    failing. The file is read ``piece_bytes`` bytes at a time; a line longer than
    ``MAX_LINE_CHARS`` is read past (see :func:`data_pieces`)."""
    for before, lines, _ in data_pieces(path, piece_bytes):
        for offset, line in enumerate(lines, before + 1):
            if is_data(line):
                yield offset, line


LongLine = Callable[[int, int], None]  # (its line number, its length so far read) -> None
Bytes = bytes | memoryview  # a piece's bytes: read, or a view of the file mapped into memory


def data_pieces(
    path: Path,
    piece_bytes: int = 1 << 22,
    *,
    max_line: int = MAX_LINE_CHARS,
    on_long_line: LongLine | None = None,
    span: tuple[int, int] | None = None,
    lazy: bool = False,
) -> Iterator[tuple[int, Sequence[str], Bytes]]:
    """``(lines before the piece, its lines, their bytes)`` for pieces of about ``piece_bytes``
    bytes of the file, every line included (see :func:`is_data`), so that a reader can treat a
    piece's lines with array operations (:class:`PieceLines`). The bytes are the lines joined
    by ``"\\n"``; bytes that are not UTF-8 are replaced in the lines (so the decoder rejects
    that line rather than the read failing) and left as they are in the bytes.

    A line longer than ``max_line`` (a 200 MB line, ``/dev/zero``) is read past without being
    held: it is an empty line in its piece, and ``on_long_line`` is told its number and length,
    so memory stays within a piece and a line whatever the file holds.

    ``span``: ``(start, end)``, the bytes to read, each at the start of a line (or the file's
    end); line counts are then from ``start``.

    ``lazy``: a piece with no carriage return and no overlong line comes as a
    :class:`PieceText`, its lines read from the bytes only when asked for: a replay hands
    nearly all of its lines to the block decoder as bytes, and making a str of each line cost
    it about as much as decoding them all. A regular file is then mapped into memory a piece
    at a time, and its bytes are a view of the map (see :func:`_mapped_pieces`)."""
    if lazy:
        mapped = _mapped_pieces(Path(path), piece_bytes, max_line, on_long_line, span)
        if mapped is not None:
            yield from mapped
            return
    yield from _read_pieces(Path(path), piece_bytes, max_line, on_long_line, span, lazy)


def _read_pieces(
    path: Path,
    piece_bytes: int,
    max_line: int,
    on_long_line: LongLine | None,
    span: tuple[int, int] | None,
    lazy: bool,
) -> Iterator[tuple[int, Sequence[str], Bytes]]:
    """:func:`data_pieces` by reads of the file."""
    before = 0
    with path.open("rb") as handle:
        rest = b""
        skipped = -1  # bytes of an overlong line read past so far; -1: not in one
        left = -1 if span is None else span[1] - span[0]  # -1: to the end
        if span is not None:
            handle.seek(span[0])
        # Read in large pieces and split at C speed: iterating a file line by line costs more
        # than a replay spends on most lines. Bytes, cut at a "\n", so that a reader of the
        # bytes (PieceLines) needs no encoding of its own.
        while piece := handle.read(piece_bytes if left < 0 else min(piece_bytes, left)):
            left -= len(piece) if left >= 0 else 0
            if skipped >= 0:  # in an overlong line: on to its end
                end = piece.find(b"\n")
                if end < 0:
                    skipped += len(piece)
                    continue
                before = _long_line(before, skipped + end, on_long_line)
                yield before - 1, [""], b""
                skipped, piece = -1, piece[end + 1 :]
            cut = piece.rfind(b"\n")
            if cut < 0:
                rest += piece
                if len(rest) > max_line:
                    skipped, rest = len(rest), b""
                continue
            lines, raw = _piece(
                rest + memoryview(piece)[:cut], before, max_line, on_long_line, lazy
            )
            rest = piece[cut + 1 :]
            yield before, lines, raw
            before += len(lines)
        if skipped >= 0:
            before = _long_line(before, skipped, on_long_line)
            yield before - 1, [""], b""
        elif rest:
            yield before, *_piece(rest, before, max_line, on_long_line, lazy)


def _mapped_pieces(
    path: Path,
    piece_bytes: int,
    max_line: int,
    on_long_line: LongLine | None,
    span: tuple[int, int] | None,
) -> Iterator[tuple[int, Sequence[str], Bytes]] | None:
    """:func:`data_pieces` of a regular file by mapping each piece into memory: no copy of its
    bytes into the process (a read, then joining a piece to the line the last one cut, cost a
    replay as much as finding all its lines). Each piece is a map of its own, unmapped once
    nothing holds its lines. None where the file cannot be mapped (a pipe, an empty file)."""
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0 or not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            first = mmap.mmap(handle.fileno(), min(size, 1), access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    first.close()
    return _map_pieces(path, size, piece_bytes, max_line, on_long_line, span)


def _map_pieces(
    path: Path,
    size: int,
    piece_bytes: int,
    max_line: int,
    on_long_line: LongLine | None,
    span: tuple[int, int] | None,
) -> Iterator[tuple[int, Sequence[str], Bytes]]:
    start, stop = (0, size) if span is None else (span[0], min(span[1], size))
    before, at = 0, start
    with path.open("rb") as handle:
        while at < stop:
            end = min(at + piece_bytes, stop)
            base = at - at % mmap.ALLOCATIONGRANULARITY  # where a map may start
            mapped = mmap.mmap(handle.fileno(), end - base, offset=base, access=mmap.ACCESS_READ)
            if end == stop:  # the last piece: up to its last line's end ("\n" or the file's)
                cut = end - 1 if mapped[end - 1 - base] == ord("\n") else end
                after = stop
            else:
                cut = mapped.rfind(b"\n", at - base)
                cut, after = (-1, -1) if cut < 0 else (base + cut, base + cut + 1)
            if cut < 0:  # a line longer than a piece: read on, and past it when overlong

                def told(number: int, length: int, before: int = before) -> None:
                    if on_long_line is not None:
                        on_long_line(before + number, length)

                for read_before, lines, raw in _read_pieces(
                    path, piece_bytes, max_line, told, (at, stop), lazy=True
                ):
                    yield before + read_before, lines, raw
                return
            raw = memoryview(mapped)[at - base : cut - base]
            if mapped.find(b"\r", at - base, cut - base) >= 0:
                lines, raw = _piece(bytes(raw), before, max_line, on_long_line, lazy=False)
            else:
                text = PieceText.of(raw)
                if len(raw) > max_line and int((text.ends - text.starts).max()) > max_line:
                    lines, raw = _piece(bytes(raw), before, max_line, on_long_line, lazy=False)
                else:
                    lines = text
            yield before, lines, raw
            before += len(lines)
            at = after


def _piece(
    raw: bytes, before: int, max_line: int, on_long_line: LongLine | None, lazy: bool
) -> tuple[Sequence[str], bytes]:
    """A piece's lines (see :func:`data_pieces`) and their bytes."""
    if lazy and b"\r" not in raw:
        text = PieceText.of(raw)
        if len(raw) <= max_line or int((text.ends - text.starts).max()) <= max_line:
            return text, raw  # (a line's bytes are no fewer than its characters)
    lines, raw = _split(raw)
    if len(raw) > max_line:
        lines, raw = _without_long_lines(before, lines, raw, max_line, on_long_line)
    return lines, raw


def _long_line(before: int, length: int, on_long_line: LongLine | None) -> int:
    """Tells of the long line after ``before`` lines; returns the lines before the next."""
    if on_long_line is not None:
        on_long_line(before + 1, length)
    return before + 1


def _without_long_lines(
    before: int, lines: list[str], raw: bytes, max_line: int, on_long_line: LongLine | None
) -> tuple[list[str], bytes]:
    """The piece with each line longer than ``max_line`` made empty (and told of)."""
    if max(map(len, lines)) <= max_line:
        return lines, raw
    for index, line in enumerate(lines):
        if len(line) > max_line:
            _long_line(before + index, len(line), on_long_line)
            lines[index] = ""
    return lines, "\n".join(lines).encode("utf-8", "surrogatepass")


def _split(raw: bytes) -> tuple[list[str], bytes]:
    """The lines of ``raw`` (which a "\\n" or the file's end follows) as text mode reads them:
    UTF-8, "\\r\\n" and "\\r" ending a line as "\\n" does (then the bytes are made again)."""
    text = raw.decode("utf-8", "replace")
    if "\r" not in text:
        return text.split("\n"), raw
    if text.endswith("\r"):  # it ends this line with the "\n" after it, or the file's last
        text = text[:-1]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.split("\n"), text.encode("utf-8", "surrogatepass")


def is_data(line: str) -> bool:
    """Whether a line holds data: not blank, not a ``#`` comment."""
    return bool(line) and not line.isspace() and line[0] != "#"


class PieceText(Sequence[str]):
    """A piece's lines as ``text.split("\\n")`` gives them, read from its bytes one at a time
    when asked for (UTF-8, bytes that are not UTF-8 replaced, as :func:`data_pieces` reads
    them), and where each starts and ends in the bytes.

    >>> text = PieceText.of(b"m f=1 5\\n\\nn g=2 6")
    >>> len(text), text[2], text[:2], text.ends.tolist()
    (3, 'n g=2 6', ['m f=1 5', ''], [7, 8, 16])
    """

    def __init__(self, raw: Bytes, starts: np.ndarray, ends: np.ndarray) -> None:
        self.raw, self.starts, self.ends = raw, starts, ends

    @classmethod
    def of(cls, raw: Bytes) -> PieceText:
        ends = (
            np.frombuffer(plain_lines.line_ends(raw), np.int64)
            if plain_lines is not None
            else np.append(np.flatnonzero(np.frombuffer(raw, np.uint8) == ord("\n")), len(raw))
        )
        return cls(raw, np.concatenate(([0], ends[:-1] + 1)), ends)

    def __len__(self) -> int:
        return len(self.ends)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        start, end = int(self.starts[index]), int(self.ends[index])
        return str(self.raw[start:end], "utf-8", "replace")


@dataclass(frozen=True)
class PieceLines:
    """A piece's lines and their bytes, with where each line starts and ends in them: what
    lets a reader look at the stamp or the head of every line with a few array operations
    rather than a Python call per line.

    >>> lines = ["gpu,node=a x=1 5", "nvidia_smi,host=h t=1 6"]
    >>> piece = PieceLines.of(lines, "\\n".join(lines).encode())
    >>> piece.plain_stamps().tolist(), piece.measured_as({"nvidia_smi"}).tolist()
    ([5, 6], [False, True])
    """

    lines: Sequence[str]
    raw: Bytes  # the lines joined by "\\n"
    starts: np.ndarray  # where each line starts in raw
    ends: np.ndarray  # where each line ends in raw (at its "\\n", or the end of raw)

    @classmethod
    def of(cls, lines: Sequence[str], raw: Bytes) -> PieceLines:
        """``raw``: the lines joined by "\\n", in UTF-8 (or bytes that hold those line breaks
        and, where a line is not UTF-8, bytes of 0x80 and above: see :func:`data_pieces`)."""
        if isinstance(lines, PieceText) and lines.raw is raw:
            return cls(lines, raw, lines.starts, lines.ends)
        raw = bytes(raw)  # (a view of a mapped file comes with its PieceText)
        if raw.isascii():  # a character is a byte: the ends follow from the lengths
            lengths = np.fromiter(map(len, lines), np.int64, len(lines))
            ends = np.cumsum(lengths + 1) - 1
        else:  # a "\n" byte is a line break, whatever else the bytes hold
            ends = np.append(np.flatnonzero(np.frombuffer(raw, np.uint8) == ord("\n")), len(raw))
        starts = np.concatenate(([0], ends[:-1] + 1))
        return cls(lines, raw, starts, ends)

    def plain_stamps(self) -> np.ndarray:
        """Each line's :func:`line_stamp` where it is plain (ASCII digits after the line's last
        space, with nothing after them), else -1: those lines need :func:`line_stamp` itself.

        A line's last ``_STAMP_WINDOW`` bytes are a row of a matrix: its stamp is what follows
        the row's last space or line break, and must be 1 to 19 digits of a value below 2**63.
        The few lines that end too near the piece's start for a row are read one by one.

        >>> lines = ["m f=1 17", "m f=1 17 ", "# m f=1 5", "m f=1 1_0", "17", "m f=1 1\\0"]
        >>> PieceLines.of(lines, "\\n".join(lines).encode()).plain_stamps().tolist()
        [17, -1, -1, -1, 17, -1]
        """
        if plain_lines is not None:  # the same reading, compiled: a pass over each stamp's bytes
            starts, ends = (np.ascontiguousarray(a, np.int64) for a in (self.starts, self.ends))
            return np.frombuffer(plain_lines.plain_stamps(self.raw, starts, ends), np.int64)
        return self.numpy_plain_stamps()

    def heads(self) -> tuple[np.ndarray, list[str]]:
        """Each line's head (its text up to and with its first space; the whole line if it has
        none) as a code into the distinct heads, listed in order of first sight: a reader of
        heads (a node tag) reads each once.

        >>> lines = ["m,node=a f=1 5", "m,node=b f=1 5", "m,node=a f=2 6", "m,node=a"]
        >>> codes, heads = PieceLines.of(lines, "\\n".join(lines).encode()).heads()
        >>> codes.tolist(), heads
        ([0, 1, 0, 2], ['m,node=a ', 'm,node=b ', 'm,node=a'])
        """
        if plain_lines is not None:
            starts, ends = (np.ascontiguousarray(a, np.int64) for a in (self.starts, self.ends))
            codes, heads = plain_lines.line_heads(self.raw, starts, ends)
            return np.frombuffer(codes, np.int32), [h.decode("utf-8", "replace") for h in heads]
        found: dict[str, int] = {}
        codes = [
            found.setdefault(
                line if (space := line.find(" ")) < 0 else line[: space + 1], len(found)
            )
            for line in self.lines
        ]
        return np.array(codes, np.int32), list(found)

    def numpy_plain_stamps(self) -> np.ndarray:
        """:meth:`plain_stamps` read with numpy (where the compiled decoder is not built)."""
        if len(self.raw) < _STAMP_WINDOW:
            return self._stamps_one_by_one(np.full(len(self.lines), -1), range(len(self.lines)))
        matrix = byte_matrix(self.raw, np.maximum(self.ends - _STAMP_WINDOW, 0), _STAMP_WINDOW)
        breaks = (matrix == ord(" ")) | (matrix == ord("\n"))
        last_break = _STAMP_WINDOW - 1 - np.argmax(breaks[:, ::-1], axis=1)
        inside = np.arange(_STAMP_WINDOW) > last_break[:, None]
        digits = matrix - np.uint8(ord("0"))
        plain = ((digits < 10) | ~inside).all(axis=1) & breaks.any(axis=1)
        plain &= last_break < _STAMP_WINDOW - 1  # at least one digit
        first = np.minimum(self.starts, len(self.raw) - 1)  # an empty last line has no byte
        plain &= np.frombuffer(self.raw, np.uint8)[first] != ord("#")
        digits *= inside & plain[:, None]
        # Below 10**19 < 2**64: exact in unsigned 64-bit sums
        values = digits.astype(np.uint64) @ _POW10_U64
        plain &= values < np.uint64(1 << 63)
        stamps = np.where(plain, values.astype(np.int64), -1)
        return self._stamps_one_by_one(stamps, np.flatnonzero(self.ends < _STAMP_WINDOW).tolist())

    def _stamps_one_by_one(self, stamps: np.ndarray, rows: Iterable[int]) -> np.ndarray:
        """``stamps`` with those of ``rows`` read from their lines' text."""
        for row in rows:
            line = self.lines[row]
            # Ending in a digit, a line's last word is its stamp as read above (no rstrip).
            stamp = line_stamp(line) if is_data(line) and line[-1:].isdigit() else None
            stamps[row] = -1 if stamp is None else stamp
        return stamps

    def measured_as(self, names: Collection[str]) -> np.ndarray:
        """Which lines' measurement (up to the first comma or space, as the replay reads it to
        tell foreign lines) is one of ``names`` (``in names``: a name's ``prefixes``, as
        :class:`~schemas.foreign_mapping.ForeignNames` has, match what they start)."""
        prefixes: tuple[str, ...] = getattr(names, "prefixes", ())
        if plain_lines is not None and all(n.isascii() for n in (*names, *prefixes)):
            starts, ends = (np.ascontiguousarray(a, np.int64) for a in (self.starts, self.ends))
            spelt = tuple(n.encode("ascii") for n in names)
            begins = tuple(p.encode("ascii") for p in prefixes)
            found = plain_lines.measured_as(self.raw, starts, ends, spelt, begins)
            return np.frombuffer(found, np.bool_)
        return self.numpy_measured_as(names)

    def numpy_measured_as(self, names: Collection[str]) -> np.ndarray:
        """:meth:`measured_as` with numpy: a line whose head's first 8 bytes are those of a
        name is checked as a str; the others cannot match."""
        found = np.zeros(len(self.lines), bool)
        # (Where a line is not UTF-8 its bytes are not its text's: only ASCII names are sure.)
        if len(self.raw) < 8 or not all(name.isascii() for name in names):
            candidates = np.ones(len(self.lines), bool)
        else:  # a line that starts in the last 7 bytes is read from the last 8, and checked
            matrix = byte_matrix(self.raw, np.minimum(self.starts, len(self.raw) - 8), 8)
            cut = (matrix == ord(",")) | (matrix == ord(" ")) | (matrix == ord("\n"))
            matrix *= np.cumsum(cut, axis=1) == 0  # zeros from the head's end on
            keys = matrix.view("<u8").ravel()
            candidates = self.starts > len(self.raw) - 8
            for name in {n.encode("ascii")[:8].ljust(8, b"\0") for n in names}:
                candidates |= keys == np.frombuffer(name, "<u8")[0]
        for row in np.flatnonzero(candidates).tolist():
            found[row] = self.lines[row].partition(",")[0].partition(" ")[0] in names
        return found


def line_stamp(line: str) -> int | None:
    """A line's timestamp (its last word), or None when it has none that reads as one.

    Only plain ASCII digits count: ``int()`` would also take ``+5``, ``1_0`` or non-ASCII
    digits, and readers that place lines by this stamp must all place them alike.
    """
    stamp = line.rstrip().rsplit(" ", 1)[-1]
    if not (stamp.isascii() and stamp.isdigit()) or len(stamp) > _MAX_STAMP_DIGITS:
        return None
    value = int(stamp)
    return value if value < 1 << 63 else None


def raw_tag(line: str, tag: str) -> str | None:
    """The value of ``tag`` in a line's head, read without decoding; None when the line has
    no such tag or it cannot be read safely, so that only decoding can tell.

    Safe means: the head (up to the first space) holds no backslash and no quote, so no
    escape can hide a separator and the raw value is the decoded value; the tag appears
    exactly once (the decoder refuses duplicates); and its value is not empty (refused too).
    """
    head, space, _ = line.partition(" ")
    if not space or "\\" in head or '"' in head:
        return None
    key = f",{tag}="
    at = head.find(key)
    if at < 0 or head.find(key, at + 1) >= 0:
        return None
    value = head[at + len(key) :].split(",", 1)[0]
    return value or None
