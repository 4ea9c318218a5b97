"""The declared measurements, tags and fields: the contract everything else obeys.

The tables live in ``measurements.csv`` and ``fields.csv`` beside this file. Loading them
rejects duplicate names, unknown types and kinds, and tag/field name clashes, so a bad edit
fails at import in every test rather than at write time in production.

A numeric field's ``min`` and ``max`` columns are its *plausible* range: what the quantity can
physically be (a ratio in [0, 1], a counter never negative, a die temperature below 150 °C),
not what is normal (the hardware profiles hold normal ranges; leaving them is evidence). A
value outside cannot be a reading, only a broken sensor, an overflow or a lie, so the flow
refuses it (:mod:`schemas.ranges`). An empty column is no bound. A hardware profile's
``[plausible]`` table narrows a GPU field's range for its model.

>>> schema = load_schema()
>>> schema.field("gpu", "power_watts").unit
'watts'
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TYPES = ("float", "int", "bool", "string")
KINDS = ("gauge", "counter", "bitmask", "event", "info")
_HERE = Path(__file__).parent


class SchemaError(ValueError):
    """The schema tables themselves are inconsistent."""


@dataclass(frozen=True)
class FieldSpec:
    measurement: str
    name: str
    type: str
    unit: str
    kind: str
    help: str
    low: float | None = None  # the plausible range, both ends included; None: unbounded
    high: float | None = None


@dataclass(frozen=True)
class MeasurementSpec:
    name: str
    tags: tuple[str, ...]
    help: str
    fields: dict[str, FieldSpec]

    def takes_keys(
        self, tag_names: tuple[str, ...], field_names: tuple[str, ...], carry_tags: bool
    ) -> bool:
        """Whether a line with these keys passes the strict decoder's key checks: keys
        distinct, every declared tag there, no undeclared tag (unless carried), only declared
        fields. The block decoders take a kind of lines on this alone."""
        return (
            len(set(tag_names)) == len(tag_names)
            and len(set(field_names)) == len(field_names)
            and set(self.tags) <= set(tag_names)
            and (carry_tags or set(tag_names) <= set(self.tags))
            and all(name in self.fields for name in field_names)
        )


@dataclass(frozen=True)
class Schema:
    measurements: dict[str, MeasurementSpec]

    def measurement(self, name: str) -> MeasurementSpec:
        try:
            return self.measurements[name]
        except KeyError:
            raise KeyError(f"undeclared measurement {name!r}") from None

    def field(self, measurement: str, name: str) -> FieldSpec:
        spec = self.measurement(measurement)
        try:
            return spec.fields[name]
        except KeyError:
            raise KeyError(f"undeclared field {measurement}.{name}") from None


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def parse_schema(
    measurement_rows: list[dict[str, str]], field_rows: list[dict[str, str]]
) -> Schema:
    """Builds a Schema from table rows, rejecting every inconsistency it can see."""
    tags: dict[str, tuple[str, ...]] = {}
    helps: dict[str, str] = {}
    for row in measurement_rows:
        name = row["measurement"].strip()
        if name in tags:
            raise SchemaError(f"measurement {name!r} is declared twice")
        declared = tuple(row["tags"].split())
        if len(set(declared)) != len(declared):
            raise SchemaError(f"measurement {name!r} declares a tag twice")
        tags[name], helps[name] = declared, row["help"]
    fields: dict[str, dict[str, FieldSpec]] = {name: {} for name in tags}
    for row in field_rows:
        where = f"{row['measurement'].strip()}.{row['field'].strip()}"
        low, high = (_bound(row.get(end), where) for end in ("min", "max"))
        spec = FieldSpec(
            **{_COLUMNS.get(key, key): value.strip() for key, value in row.items()
               if key not in ("min", "max")},
            low=low, high=high,
        )  # fmt: skip
        if spec.measurement not in tags:
            raise SchemaError(f"field {where} belongs to an undeclared measurement")
        if spec.name in fields[spec.measurement]:
            raise SchemaError(f"field {where} is declared twice")
        if spec.name in tags[spec.measurement]:
            raise SchemaError(f"field {where} has the name of one of its tags")
        if spec.type not in TYPES:
            raise SchemaError(f"field {where} has unknown type {spec.type!r}")
        if spec.kind not in KINDS:
            raise SchemaError(f"field {where} has unknown kind {spec.kind!r}")
        if not spec.unit or not spec.help:
            raise SchemaError(f"field {where} needs a unit and a help text")
        if (low is not None or high is not None) and spec.type not in ("float", "int"):
            raise SchemaError(f"field {where} has a range but is of type {spec.type}")
        if low is not None and high is not None and low > high:
            raise SchemaError(f"field {where} has min {low} above max {high}")
        fields[spec.measurement][spec.name] = spec
    for name, declared_fields in fields.items():
        if not declared_fields:
            raise SchemaError(f"measurement {name!r} declares no field")
    return Schema(
        {name: MeasurementSpec(name, tags[name], helps[name], fields[name]) for name in tags}
    )


_COLUMNS = {"field": "name"}


def _bound(text: str | None, where: str) -> float | None:
    """One end of a plausible range as written in the table (empty: none)."""
    if text is None or not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise SchemaError(f"field {where} has a range end {text!r} that is no number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise SchemaError(f"field {where} has a range end {text!r} that is not finite")
    return value


@cache
def load_schema(directory: Path = _HERE) -> Schema:
    return parse_schema(_rows(directory / "measurements.csv"), _rows(directory / "fields.csv"))
