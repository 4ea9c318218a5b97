"""The declared mappings from foreign telemetry (Telegraf, dcgm-exporter) to Reflex's schema.

The tables live in ``foreign/`` beside this file, one per foreign source, each citing the
documentation its names and units come from; ``foreign/tags.csv`` says which foreign tag gives
each Reflex tag. Loading checks every row against the Reflex schema (the target measurement and
field exist, the converter is known and fits the field's type), so a bad edit fails at import
in every test, as the schema itself does.

>>> mapping = load_foreign_mapping()
>>> row = mapping.tables["telegraf_nvidia_smi"].rows["nvidia_smi"]["memory_used"]
>>> row.reflex_measurement, row.reflex_field, row.convert, row.scale
('gpu', 'memory_used_bytes', 'scale', 1048576.0)
>>> mapping.table_of("DCGM_FI_DEV_GPU_TEMP").name
'dcgm_exporter'

A source that writes one point per resource, the resource in a tag (Telegraf's ``pressure``:
``resource=io,type=full avg10=...``), names the tag values in braces after the field, so that
each combination maps to its own Reflex field; those tags are the table's ``qualifiers`` for
that measurement, read to pick the row and not carried:

>>> table = mapping.tables["telegraf_pressure"]
>>> table.rows["pressure"]["avg10{resource=io,type=full}"].reflex_field
'psi_io_full_avg10_ratio'
>>> table.qualifiers["pressure"]
('resource', 'type')
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

from reflex_localize.schemas.contract import Schema, SchemaError, load_schema

_DIR = Path(__file__).parent / "foreign"
# Measurements under which Telegraf and Prometheus remote-write put many metrics as fields.
PROMETHEUS_MEASUREMENTS = ("prometheus", "prometheus_remote_write")
# Every DCGM field is named DCGM_FI_*: a metric no table lists (the profiling DCGM_FI_PROF_*, a
# newer exporter's) is still dcgm-exporter's, its values ignored and counted, never refused.
DCGM_PREFIX = "DCGM_FI_"
CONVERTERS = ("scale", "rate", "yes_no", "nonzero", "active_bit", "advanced_bit", "xid_event",
              "ignore")  # fmt: skip
_BOOL_CONVERTERS = ("yes_no", "nonzero")
_BIT_CONVERTERS = ("active_bit", "advanced_bit")
TAG_CONVERTERS = ("", "gpu_profile", "scrape_target")


@dataclass(frozen=True)
class FieldRow:
    """One foreign field and what it becomes: ``convert`` with its ``scale``/``offset`` (for
    scale) or ``mask`` (for the bit converters)."""

    foreign_measurement: str
    foreign_field: str
    reflex_measurement: str
    reflex_field: str
    convert: str
    scale: float = 1.0
    offset: float = 0.0
    mask: int = 0


@dataclass(frozen=True)
class TagRule:
    reflex_tag: str
    foreign_tags: tuple[str, ...]
    default: str
    convert: str


@dataclass
class MappingTable:
    """One foreign source: its rows by foreign measurement and field, its tag rules by Reflex
    measurement and tag."""

    name: str
    rows: dict[str, dict[str, FieldRow]] = field(default_factory=dict)
    tags: dict[str, list[TagRule]] = field(default_factory=dict)
    qualifiers: dict[str, tuple[str, ...]] = field(default_factory=dict)  # measurement -> tags

    @cached_property  # asked per point; the rows are complete once the table is loaded
    def prometheus(self) -> bool:
        """Whether its foreign measurements are Prometheus metric names (the value in one field,
        or the metric a field of a ``prometheus`` point) rather than Telegraf measurements."""
        return all(set(fields) == {"value"} for fields in self.rows.values())

    def row(self, measurement: str, name: str, tags: Mapping[str, str]) -> FieldRow | None:
        """The row for a field of a point with these tags: the one its qualifier tags pick,
        else the field's plain row (an ignored field need not be listed per resource)."""
        rows = self.rows.get(measurement, {})
        qualifiers = self.qualifiers.get(measurement)
        if qualifiers:
            picked = rows.get(qualified_name(name, {q: tags.get(q, "") for q in qualifiers}))
            if picked is not None:
                return picked
        return rows.get(name)


@dataclass
class ForeignMapping:
    tables: dict[str, MappingTable]
    by_measurement: dict[str, MappingTable]

    def table_of(self, measurement: str, fields: Iterable[str] = ()) -> MappingTable | None:
        """The table that maps points of ``measurement``. A ``prometheus`` or
        ``prometheus_remote_write`` point holds one exporter's metrics as its fields: the table
        of the first of them that a table knows (dcgm-exporter's when none is known)."""
        if measurement in PROMETHEUS_MEASUREMENTS:
            for name in fields:
                table = self.by_measurement.get(name)
                if table is not None and table.prometheus:
                    return table
            return self.tables.get("dcgm_exporter")
        table = self.by_measurement.get(measurement)
        if table is None and measurement.startswith(DCGM_PREFIX):
            return self.tables.get("dcgm_exporter")
        return table

    def names(self) -> ForeignNames:
        """The measurements foreign points come under (``in`` also takes any ``DCGM_FI_*``)."""
        return ForeignNames({*self.by_measurement, *PROMETHEUS_MEASUREMENTS, DCGM_PREFIX})


class ForeignNames(frozenset[str]):
    """The foreign measurements by name, and any dcgm-exporter metric by its prefix.

    >>> names = load_foreign_mapping().names()
    >>> "nvidia_smi" in names, "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in names, "gpu" in names
    (True, True, False)
    """

    prefixes = (DCGM_PREFIX,)  # what a name in it may start with (``in`` says so)

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name) or (
            isinstance(name, str) and name.startswith(self.prefixes)
        )


def qualified_name(name: str, tags: Mapping[str, str]) -> str:
    """``avg10{resource=io,type=full}``: a field as one combination of tag values gives it."""
    return name + "{" + ",".join(f"{k}={v}" for k, v in sorted(tags.items())) + "}"


def _qualifiers(foreign_field: str, where: str) -> tuple[str, ...]:
    """The tag names a row's braces name (none without braces); raises SchemaError."""
    name, brace, rest = foreign_field.partition("{")
    if not brace:
        return ()
    pairs = [pair.partition("=") for pair in rest.removesuffix("}").split(",")]
    if not rest.endswith("}") or not name or any(not k or not eq or not v for k, eq, v in pairs):
        raise SchemaError(f"{where}: {foreign_field!r}: expected field{{tag=value,...}}")
    if foreign_field != qualified_name(name, {k: v for k, _, v in pairs}):
        raise SchemaError(f"{where}: {foreign_field!r}: write its tags sorted, once each")
    return tuple(k for k, _, _ in pairs)


def _data_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        lines = [line for line in handle if line.strip() and not line.startswith("#")]
    return [{k: (v or "").strip() for k, v in row.items()} for row in csv.DictReader(lines)]


def parse_field_row(raw: dict[str, str], where: str, schema: Schema) -> FieldRow:
    """A table row checked against the schema; raises SchemaError naming the file and row."""
    kind, _, argument = raw["convert"].partition(":")
    name = f"{where}: {raw['foreign_measurement']}.{raw['foreign_field']}"
    if kind not in CONVERTERS:
        raise SchemaError(f"{name}: unknown converter {raw['convert']!r}")
    row = FieldRow(
        raw["foreign_measurement"], raw["foreign_field"], raw["reflex_measurement"],
        raw["reflex_field"], kind,
    )  # fmt: skip
    if kind == "ignore":
        if row.reflex_measurement or row.reflex_field:
            raise SchemaError(f"{name}: an ignored field maps to nothing")
        return row
    try:
        declared = schema.field(row.reflex_measurement, row.reflex_field)
    except KeyError as error:
        raise SchemaError(f"{name}: {error.args[0]}") from None
    if kind in _BIT_CONVERTERS and declared.kind != "bitmask":
        raise SchemaError(f"{name}: {kind} needs a bitmask field")
    try:
        if kind == "scale":
            scale, _, offset = argument.partition(":")
            return FieldRow(*_head(row), scale=float(scale), offset=float(offset or 0))
        if kind in _BIT_CONVERTERS:
            return FieldRow(*_head(row), mask=int(argument, 0))
    except ValueError:
        raise SchemaError(f"{name}: bad argument {argument!r} for {kind}") from None
    if kind == "rate" and declared.type != "float":
        raise SchemaError(f"{name}: rate needs a float field")
    if kind in _BOOL_CONVERTERS and declared.type != "bool":
        raise SchemaError(f"{name}: {kind} needs a bool field")
    if kind == "xid_event" and (row.reflex_measurement, row.reflex_field) != ("event", "code"):
        raise SchemaError(f"{name}: xid_event writes event.code")
    return row


def _head(row: FieldRow) -> tuple[str, str, str, str, str]:
    return (row.foreign_measurement, row.foreign_field, row.reflex_measurement,
            row.reflex_field, row.convert)  # fmt: skip


@cache
def load_foreign_mapping(directory: Path = _DIR) -> ForeignMapping:
    schema = load_schema()
    tables: dict[str, MappingTable] = {}
    by_measurement: dict[str, MappingTable] = {}
    for path in sorted(directory.glob("*.csv")):
        if path.name == "tags.csv":
            continue
        table = tables[path.stem] = MappingTable(path.stem)
        for raw in _data_rows(path):
            row = parse_field_row(raw, path.name, schema)
            fields = table.rows.setdefault(row.foreign_measurement, {})
            if row.foreign_field in fields:
                raise SchemaError(
                    f"{path.name}: {row.foreign_measurement}.{row.foreign_field} twice"
                )
            fields[row.foreign_field] = row
            qualifiers = _qualifiers(row.foreign_field, path.name)
            if qualifiers and table.qualifiers.setdefault(row.foreign_measurement,
                                                          qualifiers) != qualifiers:  # fmt: skip
                raise SchemaError(f"{path.name}: {row.foreign_field}: other tags than its rows'")
            owner = by_measurement.setdefault(row.foreign_measurement, table)
            if owner is not table:
                raise SchemaError(f"{path.name}: {row.foreign_measurement} is also in {owner.name}")
    for raw in _data_rows(directory / "tags.csv"):
        if raw["mapping"] not in tables:
            raise SchemaError(f"tags.csv: unknown mapping {raw['mapping']!r}")
        table = tables[raw["mapping"]]
        declared = schema.measurement(raw["reflex_measurement"]).tags
        if raw["reflex_tag"] not in declared or raw["convert"] not in TAG_CONVERTERS:
            raise SchemaError(f"tags.csv: bad row {raw}")
        rule = TagRule(raw["reflex_tag"], tuple(raw["foreign_tags"].split()), raw["default"],
                       raw["convert"])  # fmt: skip
        table.tags.setdefault(raw["reflex_measurement"], []).append(rule)
    for table in tables.values():
        targets = {r.reflex_measurement for rows in table.rows.values() for r in rows.values()}
        for measurement in targets - {""}:
            have = {rule.reflex_tag for rule in table.tags.get(measurement, [])}
            missing = set(schema.measurement(measurement).tags) - have
            if missing:
                raise SchemaError(
                    f"tags.csv: {table.name} gives {measurement} no {sorted(missing)}"
                )
    return ForeignMapping(tables, by_measurement)
