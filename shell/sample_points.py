"""Valid points of every declared measurement, with every field, for smoke checks and tests.

Tag and string values deliberately carry the characters line protocol must escape (space,
comma, equals sign, quote, backslash), so a round trip through InfluxDB proves the escaping.

>>> points = sample_points(per_measurement=2)
>>> sorted({p.measurement for p in points}) == sorted(load_schema().measurements)
True
"""

from __future__ import annotations

from reflex_localize.schemas.codec import FieldValue, Point
from reflex_localize.schemas.contract import FieldSpec, Schema, load_schema

START_NS = 1_700_000_000_000_000_000


def sample_value(spec: FieldSpec, index: int) -> FieldValue:
    if spec.type == "float":
        return 0.25 + index * 1.5
    if spec.type == "int":
        return 3 + index * 7
    if spec.type == "bool":
        return index % 2 == 0
    return f'{spec.name} #{index}: say "hi", a\\b=c'


def sample_tags(tags: tuple[str, ...], index: int) -> dict[str, str]:
    variant = index % 3
    return {tag: f'{tag} "{variant}",x=y' if tag == "node" else f"{tag}-{variant}" for tag in tags}


def sample_points(
    schema: Schema | None = None, *, per_measurement: int = 3, start_ns: int = START_NS
) -> list[Point]:
    """``per_measurement`` points of each measurement, one second apart, all fields set."""
    schema = schema or load_schema()
    points = []
    for spec in schema.measurements.values():
        for index in range(per_measurement):
            fields = {name: sample_value(field, index) for name, field in spec.fields.items()}
            points.append(
                Point(
                    spec.name,
                    sample_tags(spec.tags, index),
                    fields,
                    start_ns + index * 1_000_000_000,
                )
            )
    return points
