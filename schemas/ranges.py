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
        low, high, named = profiles.bounds(declared)
        with np.errstate(invalid="ignore"):  # NaN is not_finite's to report, not ours
            broken = (column < low) | (column > high)
        for row in np.flatnonzero(broken).tolist():
            if row not in reasons:
                value = column[row].item()
                reasons[row] = _reason(measurement, declared, value, row, low, high, named)
    return reasons


class _Profiles:
    """The profile column of a frame, its distinct values found once (tags repeat a lot)."""

    def __init__(self, column: np.ndarray | None) -> None:
        self.column = column
        self._distinct: list[str] | None = None
        self._inverse = np.zeros(0, np.int64)

    def bounds(
        self, declared: FieldSpec
    ) -> tuple[np.ndarray | float, np.ndarray | float, np.ndarray | None]:
        """Each row's (low, high) for the field, and the profile names the bounds came from
        (None: the schema's bounds for every row). Scalars when every row shares them."""
        low, high = plausible_range(declared)
        narrowed = any(declared.name in p.plausible for p in load_profiles().values())
        if self.column is None or not narrowed:
            return low, high, None
        if self._distinct is None:
            distinct, self._inverse = np.unique(self.column.astype(str), return_inverse=True)
            self._distinct = distinct.tolist()
        named = np.array(self._distinct, object)[self._inverse]
        ends = np.array([plausible_range(declared, name) for name in self._distinct])
        if len(self._distinct) == 1:
            return float(ends[0, 0]), float(ends[0, 1]), named
        return ends[self._inverse, 0], ends[self._inverse, 1], named


def _reason(
    measurement: str,
    declared: FieldSpec,
    value: object,
    row: int,
    low: np.ndarray | float,
    high: np.ndarray | float,
    named: np.ndarray | None,
) -> PointError:
    low_end = float(low[row]) if isinstance(low, np.ndarray) else low
    high_end = float(high[row]) if isinstance(high, np.ndarray) else high
    where = f" on {named[row]}" if named is not None else ""
    unit = "" if declared.unit in ("none", "ratio") else f" {declared.unit}"
    return PointError(
        f"{value!r} is outside the plausible range [{low_end:g}, {high_end:g}]{unit}{where}",
        measurement, declared.name, code="out_of_range",
    )  # fmt: skip
