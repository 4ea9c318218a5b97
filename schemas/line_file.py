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

from collections.abc import Iterator
from pathlib import Path

import numpy as np

_MAX_STAMP_DIGITS = len(str(1 << 63))


def data_lines(path: Path, piece_chars: int = 1 << 22) -> Iterator[tuple[int, str]]:
    """``(line number, text without its newline)`` of each line of the file at ``path`` that
    holds data: blank lines and ``#`` comments are skipped, numbers count every line. Bytes
    that are not UTF-8 are replaced, so the decoder rejects that line rather than the read
    failing. The file is read ``piece_chars`` characters at a time."""
    for before, lines, _ in data_pieces(path, piece_chars):
        for offset, line in enumerate(lines, before + 1):
            if is_data(line):
                yield offset, line


def data_pieces(path: Path, piece_chars: int = 1 << 22) -> Iterator[tuple[int, list[str], str]]:
    """``(lines before the piece, its lines, their text)`` for pieces of about ``piece_chars``
    characters of the file, every line included (see :func:`is_data`), so that a reader can
    treat a piece's lines with array operations."""
    before = 0
    with Path(path).open(errors="replace") as handle:
        rest = ""
        # Read in large pieces and split at C speed: iterating a file line by line costs more
        # than a replay spends on most lines. Text mode turns "\r\n" and "\r" into "\n".
        while piece := handle.read(piece_chars):
            text, _, rest = (rest + piece).rpartition("\n")
            if text or _:
                lines = text.split("\n")
                yield before, lines, text
                before += len(lines)
        if rest:
            yield before, [rest], rest


def is_data(line: str) -> bool:
    """Whether a line holds data: not blank, not a ``#`` comment."""
    return bool(line) and not line.isspace() and line[0] != "#"


def plain_stamps(lines: list[str], text: str) -> np.ndarray | None:
    """Each line's :func:`line_stamp` where it is plain (ASCII digits after the line's last
    space, with nothing after them), else -1: those lines need :func:`line_stamp` itself.
    ``text`` is the lines joined by newlines. None when no line's stamp can be read so (a
    NUL or a non-ASCII character in a stamp).

    >>> plain_stamps(["m f=1 17", "m f=1 17 ", "# m f=1 5", "m f=1 1_0"], "").tolist()
    [17, -1, -1, -1]
    """
    if "\0" in text:  # bytes arrays drop trailing NULs, which would make "5\0" read as 5
        return None
    words = [line.rpartition(" ")[2] for line in lines]
    try:
        raw = np.array(words, dtype=np.bytes_)
    except UnicodeEncodeError:
        return None
    if raw.itemsize > _MAX_STAMP_DIGITS:
        return None  # a long last word somewhere: rare enough to read every line the slow way
    digits = raw.view(np.uint8).reshape(len(words), raw.itemsize)
    plain = ((digits >= ord("0")) & (digits <= ord("9"))) | (digits == 0)
    width = (digits != 0).sum(axis=1)
    good = plain.all(axis=1) & (width > 0)
    good &= np.array([line[:1] != "#" for line in lines], bool)
    values = np.full(len(words), -1, np.int64)
    if good.any():
        parsed = raw[good].astype(np.uint64)
        fits = parsed < np.uint64(1 << 63)
        chosen = np.flatnonzero(good)
        values[chosen[fits]] = parsed[fits].astype(np.int64)
    return values


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
