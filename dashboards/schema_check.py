"""Checks that Flux queries name only measurements, fields and tags declared in schemas/.

Dashboards, alert tasks and cookbook queries are Flux text. This module pulls out every
literal name they filter on and compares it with the contract, so a renamed or misspelt
field fails the tests instead of drawing an empty panel in production.

What it reads (``r.x`` and ``r["x"]`` alike):
- ``r._measurement == "gpu"`` and ``r._field == "power_watts"`` (also ``!=``);
- ``contains(value: r._field, set: ["a", "b"])`` and the same for ``_measurement``;
- ``tag: "node"`` in ``schema.tagValues`` and friends.

A field must belong to one of the measurements its query names (or, when the query names
none, to any measurement). Regular expressions and computed names are not checked.

>>> check_query('from(bucket: "t") |> filter(fn: (r) => r._measurement == "gpu" '
...             'and r._field == "power_watts")')
[]
>>> check_query('filter(fn: (r) => r._measurement == "gpu" and r._field == "watts")')
["field 'watts' is not declared for measurement(s) gpu"]
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from reflex_localize.schemas.contract import Schema, load_schema

_COLUMN = r'r(?:\.(?P<{g}>_measurement|_field)|\["(?P<{g}b>_measurement|_field)"\])'
_COMPARISON = re.compile(_COLUMN.format(g="col") + r'\s*[!=]=\s*"(?P<name>[^"\\]*)"')
_CONTAINS = re.compile(
    r"contains\(\s*value:\s*" + _COLUMN.format(g="col") + r"\s*,\s*set:\s*\[(?P<set>[^\]]*)\]"
)
_TAG_ARGUMENT = re.compile(r'\btag:\s*"(?P<name>[^"\\]*)"')
_STRING = re.compile(r'"([^"\\]*)"')
_COMMENT = re.compile(r"//[^\n]*")
# Columns every Flux table has; naming them in tag: "..." is fine.
_BUILTIN_COLUMNS = {"_measurement", "_field", "_value", "_time", "_start", "_stop"}


@dataclass(frozen=True)
class NamesUsed:
    measurements: frozenset[str]
    fields: frozenset[str]
    tags: frozenset[str]


def names_used(flux: str) -> NamesUsed:
    """The measurement, field and tag names a Flux text filters on."""
    flux = _COMMENT.sub("", flux)
    found: dict[str, set[str]] = {"_measurement": set(), "_field": set()}
    for match in _COMPARISON.finditer(flux):
        found[match["col"] or match["colb"]].add(match["name"])
    for match in _CONTAINS.finditer(flux):
        found[match["col"] or match["colb"]].update(_STRING.findall(match["set"]))
    tags = {m["name"] for m in _TAG_ARGUMENT.finditer(flux)} - _BUILTIN_COLUMNS
    return NamesUsed(frozenset(found["_measurement"]), frozenset(found["_field"]), frozenset(tags))


def check_query(flux: str, schema: Schema | None = None) -> list[str]:
    """Problems with the names in one query; empty when every name is declared."""
    schema = schema or load_schema()
    used = names_used(flux)
    problems = [
        f"measurement {name!r} is not declared"
        for name in sorted(used.measurements)
        if name not in schema.measurements
    ]
    declared = [
        schema.measurements[m] for m in sorted(used.measurements) if m in schema.measurements
    ]
    scope = declared or list(schema.measurements.values())
    where = ", ".join(spec.name for spec in declared) or "any"
    problems += [
        f"field {name!r} is not declared for measurement(s) {where}"
        for name in sorted(used.fields)
        if not any(name in spec.fields for spec in scope)
    ]
    all_tags = {tag for spec in schema.measurements.values() for tag in spec.tags}
    problems += [f"tag {name!r} is not declared" for name in sorted(used.tags - all_tags)]
    return problems


def check_queries(queries: Iterable[tuple[str, str]], schema: Schema | None = None) -> list[str]:
    """Problems across many ``(where, flux)`` pairs, each prefixed with its ``where``."""
    return [
        f"{where}: {problem}" for where, flux in queries for problem in check_query(flux, schema)
    ]


def flux_files(*directories: Path) -> list[tuple[str, str]]:
    """``(path, text)`` of every ``.flux`` file under the directories, for check_queries."""
    return [
        (str(path), path.read_text())
        for directory in directories
        for path in sorted(directory.rglob("*.flux"))
    ]
