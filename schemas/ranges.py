"""Plausible ranges: a value no sensor could read is refused with a reason, never evidence.

The schema gives each numeric field the range the quantity can physically have (the ``min``
and ``max`` columns of ``fields.csv``); a hardware profile's ``[plausible]`` table narrows a
GPU field for its model (``schemas/hardware/*.toml``). A value outside is a broken sensor, an
overflow or a lie: a loss of 1e23 would be read as silent data corruption, a temperature of
4000 °C as a hot GPU. :func:`~schemas.frame.validate_frame`, the flow's one validation step,
refuses such rows with the code ``out_of_range``, so they are counted in the error stream like
any other malformed record. What is merely unusual (a hot GPU, a slow step) stays in: that is
what the flow is there to judge.

>>> import numpy as np
>>> from reflex_localize.schemas.contract import load_schema
>>> loss = {"loss": np.array([2.5, 1e23])}
>>> [(row, error.code) for row, error in out_of_range("train_step", {}, loss,
...                                                   load_schema()).items()]
[(1, 'out_of_range')]
>>> plausible_range(load_schema().field("gpu", "power_watts"), "h100-sxm5-80gb")
(0.0, 1400.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache

import numpy as np

from reflex_localize.schemas.codec import PointError
from reflex_localize.schemas.contract import FieldSpec, Schema
from reflex_localize.schemas.hardware_profiles import load_profiles

PROFILE_TAG = "profile"  # the tag that names a row's hardware profile, where there is one


def plausible_range(spec: FieldSpec, profile: str | None = None) -> tuple[float, float]:
    """The range a value of ``spec`` can have, both ends included (infinite: no bound), on
    the hardware ``profile`` names (an unknown profile: the schema's range alone)."""
    low = -math.inf if spec.low is None else spec.low
    high = math.inf if spec.high is None else spec.high
    known = load_profiles().get(profile) if profile else None
    if known is not None and spec.name in known.plausible:
        narrow_low, narrow_high = known.plausible[spec.name]
        low, high = max(low, narrow_low), min(high, narrow_high)
    return low, high


def out_of_range(
    measurement: str,
    tags: Mapping[str, np.ndarray],
    fields: Mapping[str, np.ndarray],
    schema: Schema,
) -> dict[int, PointError]:
    """The rows of a frame's columns with a value outside its field's plausible range, with
    the first such field's reason. The columns are of their declared types already."""
    spec = schema.measurement(measurement)
    profiles = _Profiles(tags.get(PROFILE_TAG) if PROFILE_TAG in spec.tags else None)
    reasons: dict[int, PointError] = {}
    for name, column in fields.items():
        declared = spec.fields[name]
        if declared.type not in ("float", "int") or not len(column):
            continue
        low, high = profiles.bounds(declared)
        with np.errstate(invalid="ignore"):  # NaN is not_finite's to report, not ours
            broken = (column < low) | (column > high)
        for row in np.flatnonzero(broken).tolist():
            if row not in reasons:
                reasons[row] = profiles.reason(measurement, declared, column[row].item(), row)
    return reasons


class _Profiles:
    """The profile column of a frame (None: the measurement has none), looked at once: it
    holds one value, or a few, repeated on every row."""

    def __init__(self, column: np.ndarray | None) -> None:
        self.values: list[str] = [] if column is None else column.tolist()
        self.distinct = sorted(set(self.values), key=str)
        self._codes: np.ndarray | None = None  # each row's index into distinct, when mixed

    def bounds(self, declared: FieldSpec) -> tuple[np.ndarray | float, np.ndarray | float]:
        """Each row's (low, high) for the field: scalars when every row shares them."""
        if len(self.distinct) <= 1 or not _narrowed(declared.name):
            return plausible_range(declared, self.distinct[0] if self.distinct else None)
        if self._codes is None:
            index = {name: code for code, name in enumerate(self.distinct)}
            self._codes = np.fromiter((index[v] for v in self.values), np.int64, len(self.values))
        ends = np.array([plausible_range(declared, name) for name in self.distinct])
        return ends[self._codes, 0], ends[self._codes, 1]

    def reason(self, measurement: str, declared: FieldSpec, value: object, row: int) -> PointError:
        profile = str(self.values[row]) if self.values else None
        low, high = plausible_range(declared, profile)
        where = f" on {profile}" if profile is not None and _narrowed(declared.name) else ""
        unit = "" if declared.unit in ("none", "ratio") else f" {declared.unit}"
        return PointError(
            f"{value!r} is outside the plausible range [{low:g}, {high:g}]{unit}{where}",
            measurement, declared.name, code="out_of_range",
        )  # fmt: skip


@cache
def _narrowed(field: str) -> bool:
    """Whether some hardware profile narrows the field's range."""
    return any(field in profile.plausible for profile in load_profiles().values())
