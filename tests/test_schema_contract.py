"""The schema loader: the shipped tables load, and every inconsistency is refused."""

from __future__ import annotations

import pytest

from reflex_localize.schemas.contract import KINDS, TYPES, SchemaError, load_schema, parse_schema

FAMILIES = {"gpu", "host", "nic", "ib_port", "event", "train_step", "job_membership"}
OWN_OUTPUTS = {"reflex_baseline", "reflex_score", "reflex_event"}


def measurement(name: str = "m", tags: str = "cluster node") -> dict[str, str]:
    return {"measurement": name, "tags": tags, "help": "a measurement"}


def field(name: str = "f", *, measurement: str = "m", **overrides: str) -> dict[str, str]:
    row = {
        "measurement": measurement,
        "field": name,
        "type": "float",
        "unit": "ratio",
        "kind": "gauge",
        "help": "a field",
    }
    row.update(overrides)
    return row


def test_the_shipped_schema_loads_and_covers_the_design():
    schema = load_schema()
    assert set(schema.measurements) >= FAMILIES | OWN_OUTPUTS
    for spec in schema.measurements.values():
        assert spec.tags and spec.fields
        for declared in spec.fields.values():
            assert declared.type in TYPES and declared.kind in KINDS
            assert declared.unit and declared.help


def test_counters_named_total_are_counters():
    for spec in load_schema().measurements.values():
        for declared in spec.fields.values():
            if declared.name.endswith("_total"):
                assert declared.kind == "counter", f"{spec.name}.{declared.name}"


def test_a_minimal_schema_parses():
    schema = parse_schema([measurement()], [field()])
    assert schema.field("m", "f").type == "float"
    assert schema.measurement("m").tags == ("cluster", "node")


@pytest.mark.parametrize(
    "measurements, fields, message",
    [
        ([measurement(), measurement()], [field()], "declared twice"),
        ([measurement(tags="node node")], [field()], "declares a tag twice"),
        ([measurement()], [field(), field()], "declared twice"),
        ([measurement()], [field("node")], "name of one of its tags"),
        ([measurement()], [field(type="double")], "unknown type"),
        ([measurement()], [field(kind="histogram")], "unknown kind"),
        ([measurement()], [field(unit="")], "needs a unit"),
        ([measurement()], [field(help="")], "help"),
        ([measurement()], [field(measurement="other")], "undeclared measurement"),
        ([measurement(), measurement("empty")], [field()], "declares no field"),
    ],
)
def test_inconsistent_tables_are_refused(measurements, fields, message):
    with pytest.raises(SchemaError, match=message):
        parse_schema(measurements, fields)


def test_lookups_name_what_is_missing():
    schema = parse_schema([measurement()], [field()])
    with pytest.raises(KeyError, match="undeclared measurement 'x'"):
        schema.measurement("x")
    with pytest.raises(KeyError, match=r"undeclared field m\.g"):
        schema.field("m", "g")
