"""Line protocol for whole frames, column by column, byte-identical to ``codec.encode``.

:func:`~schemas.codec.encode` validates and formats one point at a time, which suits
collectors but is too slow for millions of simulated rows. A frame is validated in bulk by
:func:`~schemas.frame.validate_frame` instead, and formatted here with the codec's own escape
and format functions, applied once per distinct tag value and once per column. What could
break the line apart (a tag value line protocol cannot carry, a line break in a string) is
still refused here, with the codec's reason, rather than written as a line that means
something else.

>>> import numpy as np
>>> from reflex_localize.schemas.frame import Frame
>>> f = Frame("host", np.array([5], dtype=np.int64),
...           {"cluster": np.array(["sim"], dtype=object), "node": np.array(["n 1"], dtype=object)},
...           {"load1": np.array([0.5]), "procs_running": np.array([3])})
>>> encode_frame(f)
['host,cluster=sim,node=n\\\\ 1 load1=0.5,procs_running=3i 5']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reflex_localize.schemas.codec import (
    PointError,
    checked_tag_value,
    checked_value,
    escape_key,
    escape_measurement,
    format_bool,
    format_float,
    format_int,
    format_string,
)
from reflex_localize.schemas.frame import Frame

_FORMAT_BY_KIND: dict[str, Callable[[Any], str]] = {
    "f": format_float,
    "i": format_int,
    "u": format_int,
    "b": format_bool,
    "O": format_string,
    "U": format_string,
}


def encode_frame(frame: Frame) -> list[str]:
    """One line per row, as ``encode`` writes each of ``frame.points()``; raises PointError."""
    rows = len(frame)
    if not rows:
        return []
    if not frame.fields:
        raise PointError("a point needs at least one field", frame.measurement)
    tags = [_tag_texts(frame, key) for key in sorted(frame.tags)]
    heads = [
        "".join(row)
        for row in zip([escape_measurement(frame.measurement)] * rows, *tags, strict=True)
    ]
    fields = [_field_texts(frame, name) for name in frame.fields]
    values = [",".join(row) for row in zip(*fields, strict=True)]
    times = frame.time_ns.tolist()
    return [f"{h} {v} {t}" for h, v, t in zip(heads, values, times, strict=True)]


def _tag_texts(frame: Frame, key: str) -> list[str]:
    """``,key=value`` for each row; tag values repeat, so each distinct one is escaped once."""
    values = frame.tags[key].tolist()
    try:
        distinct = set(values)
    except TypeError:  # an unhashable value is no string
        raise PointError("missing or empty tag", frame.measurement, key) from None
    prefix = f",{escape_key(key)}="
    texts = {
        value: prefix + escape_key(checked_tag_value(value, frame.measurement, key))
        for value in distinct
    }
    return [texts[value] for value in values]


def _field_texts(frame: Frame, name: str) -> list[str]:
    column = frame.fields[name]
    kind = column.dtype.kind
    if kind not in _FORMAT_BY_KIND:
        raise PointError(f"no line-protocol type for dtype {column.dtype}", frame.measurement, name)
    values = column.tolist()
    if kind in "OU":
        for value in values:
            checked_value(value, "string", frame.measurement, name)
    prefix = escape_key(name) + "="
    return [prefix + text for text in map(_FORMAT_BY_KIND[kind], values)]
