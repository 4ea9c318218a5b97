"""The block decoder's fast path for plain lines, compiled (:file:`schemas/plain_lines.c`).

The numpy path of :mod:`schemas.line_decoder` makes no Python object per token, but pays a
numpy call per kind and per column, and a replay spent most of its source's time there. The
compiled path reads the same plain lines in one pass each, vouches for the same spellings with
the same values, and hands every other line back: those it could not vouch for to the strict
decoder, and the lines that are not plain (quoted strings, escapes, non-ASCII) to the numpy
path. The install builds it where a C compiler is found (``setup.py``); elsewhere, or with
``REFLEX_LINE_DECODER=numpy``, the numpy path reads every line, more slowly, to the same frames.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol, cast

import numpy as np

from reflex_localize.schemas.contract import Schema
from reflex_localize.schemas.frame import Frame

try:
    from reflex_localize.schemas import plain_lines  # type: ignore[attr-defined]
except ImportError:  # no compiler where it was installed: the numpy path reads every line
    plain_lines = None

_TYPE_CODES = {"float": b"f", "int": b"i", "bool": b"b"}

Key = tuple[str, tuple[str, ...], tuple[str, ...]]


def compiled_available() -> bool:
    """Whether the compiled path is built here and not turned off."""
    return plain_lines is not None and os.environ.get("REFLEX_LINE_DECODER", "") != "numpy"


class HeldAsSpans(Protocol):
    """Lines held as spans of bytes (``flows.io.window_lines.WindowLines``): line ``p`` is
    ``raws[which[p]][starts[p]:ends[p]]``, and no str need be made of a plain one."""

    def spans(self) -> tuple[list[bytes], np.ndarray, np.ndarray, np.ndarray]: ...


def compiled_parts(
    lines: Sequence[str], schema: Schema, carry_tags: bool
) -> tuple[list[tuple[Key, np.ndarray, Frame, bool]], np.ndarray, np.ndarray]:
    """``(parts, strict, other)``: a (key, line positions, frame, whether two rows share tags
    and stamp) per kind read; the positions of plain lines for the strict decoder; those of
    lines that are not plain."""
    assert plain_lines is not None
    asked: dict[tuple[tuple[str, ...], int], bytes | None] = {}

    def field_types(names: tuple[str, ...], tags: int) -> bytes | None:
        if (names, tags) not in asked:
            asked[names, tags] = _field_types(names, tags, schema, carry_tags)
        return asked[names, tags]

    if hasattr(lines, "spans"):
        raws, which, starts, ends = cast(HeldAsSpans, lines).spans()
        read = plain_lines.decode_spans(raws, which, starts, ends, field_types)
    else:
        read = plain_lines.decode(lines if isinstance(lines, list) else list(lines), field_types)
    kinds, strict, other = read
    parts = []
    for names, tags, rows, times, tag_columns, field_columns, repeats in kinds:
        spec = schema.measurements[names[0]]
        tag_names, field_names = names[1 : 1 + tags], names[1 + tags :]
        tag_codes = {
            name: (np.array(values, object), np.frombuffer(codes, np.int32).astype(np.int64))
            for name, (codes, values) in zip(tag_names, tag_columns, strict=True)
        }
        frame = Frame(
            spec.name,
            np.frombuffer(times, np.int64),
            {name: distinct[codes] for name, (distinct, codes) in tag_codes.items()},
            {name: np.frombuffer(column, _DTYPES[spec.fields[name].type])
             for name, column in zip(field_names, field_columns, strict=True)},
            tag_codes,
        )  # fmt: skip
        key = (spec.name, tag_names, field_names)
        parts.append((key, np.frombuffer(rows, np.int64), frame, repeats))
    return parts, np.frombuffer(strict, np.int64), np.frombuffer(other, np.int64)


_DTYPES = {"float": np.float64, "int": np.int64, "bool": np.bool_}


def _field_types(
    names: tuple[str, ...], tags: int, schema: Schema, carry_tags: bool
) -> bytes | None:
    """The fields' type codes when the kind's keys are what the strict decoder accepts
    without a word, else None: its lines go to that decoder."""
    spec = schema.measurements.get(names[0])
    tag_names, field_names = names[1 : 1 + tags], names[1 + tags :]
    if spec is None or not spec.takes_keys(tag_names, field_names, carry_tags):
        return None
    codes = [_TYPE_CODES.get(spec.fields[name].type) for name in field_names]
    return None if None in codes else b"".join(c for c in codes if c is not None)
