"""Line protocol for whole frames, column by column, byte-identical to ``schemas.codec.encode``.

The codec validates and formats one point at a time, which is right for collectors but too
slow for millions of simulated rows. Frames from the simulator are validated in bulk by
``validate_frame`` instead, and formatted here with one string conversion per column.

>>> import numpy as np
>>> from schemas.frame import Frame
>>> f = Frame("host", np.array([5], dtype=np.int64),
...           {"cluster": np.array(["sim"], dtype=object), "node": np.array(["n1"], dtype=object)},
...           {"load1": np.array([0.5]), "procs_running": np.array([3])})
>>> frame_lines(f)
['host,cluster=sim,node=n1 load1=0.5,procs_running=3i 5']
"""

from __future__ import annotations

import numpy as np

from schemas.frame import Frame


def _escape_key(values: np.ndarray) -> list[str]:
    out = values.astype(str)
    for raw, escaped in (("\\", "\\\\"), (",", "\\,"), ("=", "\\="), (" ", "\\ ")):
        out = np.char.replace(out, raw, escaped)
    return out.tolist()


def _field_text(name: str, column: np.ndarray) -> list[str]:
    prefix = name.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")
    kind = column.dtype.kind
    if kind == "b":
        texts = np.where(column, "true", "false").tolist()
    elif kind in "iu":
        texts = [f"{v}i" for v in column.tolist()]
    elif kind == "f":
        texts = [repr(v) for v in column.tolist()]
    else:
        texts = ['"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in column.tolist()]
    return [f"{prefix}={t}" for t in texts]


def frame_lines(frame: Frame) -> list[str]:
    """One line per row, tags sorted by key as the codec writes them."""
    if not len(frame):
        return []
    head = [frame.measurement] * len(frame)
    for key in sorted(frame.tags):
        values = _escape_key(np.asarray(frame.tags[key]))
        head = [f"{h},{key}={v}" for h, v in zip(head, values, strict=True)]
    columns = [_field_text(name, column) for name, column in frame.fields.items()]
    fields = [",".join(row) for row in zip(*columns, strict=True)]
    times = frame.time_ns.tolist()
    return [f"{h} {f} {t}" for h, f, t in zip(head, fields, times, strict=True)]
