"""Foreign telemetry (Telegraf, dcgm-exporter) to Reflex points.

A cluster that already runs Telegraf or dcgm-exporter has its GPUs and ports in InfluxDB under
other names and units. :class:`ForeignTranslator` turns each such point into the Reflex points
the tables of :mod:`schemas.foreign_mapping` declare: names mapped, units converted, tags taken
from the foreign ones (``host`` -> ``node``, ``index`` -> ``gpu``), the rest of the tags carried.
A foreign field with no Reflex counterpart is ignored and counted, never a reason to refuse the
point; a point that cannot become a Reflex point (no host tag, a value of the wrong type) is
refused with a fixed code. Lines of Reflex's own measurements pass through :func:`decode`.

Three converters need the previous sample of the same series, so a translator keeps a little
memory (one number per GPU or node and field): a throttle-time counter sets its clocks-event bit
while it advances, dcgm-exporter's last-XID gauge gives one XID event each time it changes to a
new non-zero code (a code already there when first seen may be days old: counted, not raised),
and node_exporter's stall-seconds counters give the share of time stalled between two scrapes.

>>> t = ForeignTranslator(cluster="c1")
>>> line = ("nvidia_smi,host=gpu-7,index=3,name=NVIDIA\\\\ H100\\\\ 80GB\\\\ HBM3,pstate=P0 "
...         "memory_used=549i,utilization_gpu=87i,fan_speed=30i 1700000000000000000")
>>> [point], notes = t.decode(line)
>>> point.tags == {"cluster": "c1", "node": "gpu-7", "gpu": "3", "profile": "h100-sxm5-80gb",
...                "pstate": "P0"}
True
>>> point.fields
{'memory_used_bytes': 575668224, 'utilization_gpu_ratio': 0.87}
>>> [(n.where, n.code) for n in notes], t.stats.ignored
([('carried', 'foreign_field_ignored')], Counter({'nvidia_smi.fan_speed': 1}))
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from reflex_localize.schemas.codec import (
    FieldValue,
    Point,
    PointError,
    _parse_pairs,
    _split_escaped,
    _unescape_key,
    decode,
    validate,
)
from reflex_localize.schemas.contract import load_schema
from reflex_localize.schemas.foreign_mapping import (
    PROMETHEUS_MEASUREMENTS,
    FieldRow,
    ForeignMapping,
    MappingTable,
    TagRule,
    load_foreign_mapping,
    qualified_name,
)
from reflex_localize.schemas.hardware_profiles import profile_for_gpu_name

# Telegraf inputs.prometheus (metric_version 1) puts a gauge's value in "gauge", a counter's in
# "counter"; the prometheusremotewrite parser (metric_version 1) in "value".
_VALUE_FIELDS = ("gauge", "counter", "value")
# A backslash escapes the next character, so the head is a run of non-space, non-backslash
# characters and escape pairs; the measurement ends at the first unescaped comma.
_HEAD = re.compile(r"((?:[^ \\]|\\.)*) (.*)", re.DOTALL)
_HEAD_TAGS = re.compile(r"((?:[^,\\]|\\.)*)(?:,(.*))?", re.DOTALL)
_YES = {"yes": True, "no": False, "true": True, "false": False}
_ACTIVE = {"active": True, "not active": False}


@dataclass(frozen=True)
class Note:
    """What the translator tells the error stream: a refused foreign point (``where``
    "translate"), or the first time a foreign field is ignored (``where`` "carried"; every
    further value is counted in :class:`TranslateStats` only)."""

    where: str
    code: str
    detail: str


@dataclass
class TranslateStats:
    points_in: int = 0
    points_out: int = 0
    ignored: Counter[str] = field(default_factory=Counter)  # "measurement.field" -> values
    refused: Counter[str] = field(default_factory=Counter)  # code -> foreign points
    stale_xids: int = 0  # non-zero last-XID gauges first seen, not raised (may be old)


class ForeignTranslator:
    """Translates foreign points for one stream (one replay, one shard): its memory follows the
    stream, so give each stream its own translator."""

    def __init__(self, cluster: str = "default", mapping: ForeignMapping | None = None) -> None:
        self.cluster = cluster
        self.mapping = mapping or load_foreign_mapping()
        self.stats = TranslateStats()
        self._last: dict[tuple[str, ...], float] = {}  # previous counter or XID per GPU, field
        self._last_at: dict[tuple[str, ...], tuple[float, int]] = {}  # a rate's previous sample
        self._told: set[str] = set()  # ignored fields already noted once
        self._reflex_heads: dict[str, bool] = {}  # measurement -> is_reflex_line's answer

    def is_foreign(self, measurement: str) -> bool:
        return self.mapping.table_of(measurement) is not None

    def is_reflex_line(self, line: str) -> bool:
        """Whether a line is Reflex's own, to decode as it is (a block decoder may take it):
        its measurement, up to the first comma or space, is escaped or not a foreign one.
        Remembered per measurement: a stream repeats a few of them."""
        head = line.partition(",")[0].partition(" ")[0]
        reflex = self._reflex_heads.get(head)
        if reflex is None:
            reflex = self._reflex_heads[head] = "\\" in head or not self.is_foreign(head)
        return reflex

    def decode(self, line: str) -> tuple[list[Point], list[Note]]:
        """The Reflex points of one line; raises PointError for a line of no known source."""
        comma, space = line.find(","), line.find(" ")
        head = line[: comma if 0 <= comma < space or space < 0 else space]  # the measurement
        if "\\" in head or not self.is_foreign(head):
            return [decode(line, carry_tags=True)], []
        return self.translate(parse_line(line))

    def translate(self, point: Point) -> tuple[list[Point], list[Note]]:
        table = self.mapping.table_of(point.measurement, point.fields)
        if table is None:
            raise PointError("undeclared measurement", point.measurement,
                             code="undeclared_measurement")  # fmt: skip
        self.stats.points_in += 1
        notes: list[Note] = []
        samples = _samples(point, table)
        if samples is None:
            return [], [self._refuse("foreign_bad_shape", f"{point.measurement}: no value field")]
        targets: dict[str, dict[str, FieldValue]] = {}
        tags: dict[str, dict[str, str]] = {}
        events: list[Point] = []
        for name, row, value in samples:
            if row is None or row.convert == "ignore":
                notes += self._ignore(f"{_source_name(point, name)}", known=row is not None)
                continue
            target = row.reflex_measurement
            if target not in tags:
                resolved = self._tags(table, target, point.tags, point.measurement)
                if isinstance(resolved, Note):
                    return [], [resolved]
                tags[target] = resolved
            try:
                converted = self._convert(row, value, tags[target], point)
            except (KeyError, TypeError, ValueError) as error:  # KeyError: not Yes/No
                notes.append(self._refuse("foreign_bad_value", f"{name}={value!r}: {error}"))
                continue
            if isinstance(converted, Point):
                events.append(converted)
            elif converted is not None:
                _combine(targets.setdefault(target, {}), row, converted)
        out = []
        for target, fields in targets.items():
            try:
                out.append(validate(Point(target, tags[target], fields, point.time_ns),
                                    carry_tags=True))  # fmt: skip
            except PointError as error:
                notes.append(self._refuse(error.code, str(error)))
        out += events
        self.stats.points_out += len(out)
        return out, notes

    def _refuse(self, code: str, detail: str) -> Note:
        self.stats.refused[code] += 1
        return Note("translate", code, detail[:300])

    def _ignore(self, name: str, known: bool) -> list[Note]:
        self.stats.ignored[name] += 1
        if name in self._told:
            return []
        self._told.add(name)
        why = "no Reflex field" if known else "not in the mapping tables (schemas/foreign/)"
        code = "foreign_field_ignored" if known else "foreign_field_unknown"
        return [Note("carried", code, f"{name}: {why}; further values counted, not noted")]

    def _tags(
        self, table: MappingTable, target: str, foreign: Mapping[str, str], measurement: str
    ) -> dict[str, str] | Note:
        out: dict[str, str] = {}
        consumed = set(table.qualifiers.get(measurement, ()))  # they picked the row: not carried
        for rule in table.tags[target]:
            consumed.update(name for name in rule.foreign_tags if foreign.get(name))
            value = self._tag_value(rule, foreign)
            if not value:
                wanted = " or ".join(rule.foreign_tags)
                self.stats.refused["foreign_missing_tag"] += 1
                return Note("translate", "foreign_missing_tag",
                            f"{target}.{rule.reflex_tag}: no {wanted} tag")  # fmt: skip
            out[rule.reflex_tag] = value
        for name, value in foreign.items():  # carried: a site's rack, Telegraf's uuid...
            if name not in consumed and name not in out:
                out[name] = value
        return out

    def node_of(self, point: Point) -> str | None:
        """The Reflex node a foreign point would be translated to, without translating it:
        a reader that keeps only its own nodes' points skips the rest cheaply."""
        table = self.mapping.table_of(point.measurement, point.fields)
        if table is None:
            return None
        for rules in table.tags.values():
            for rule in rules:
                if rule.reflex_tag == "node":
                    return self._tag_value(rule, point.tags) or None
        return None

    def _tag_value(self, rule: TagRule, foreign: Mapping[str, str]) -> str:
        present = [name for name in rule.foreign_tags if foreign.get(name)]
        if rule.convert == "scrape_target":
            present = [name for name in present if scrape_target(name, foreign[name])]
        value = foreign[present[0]] if present else rule.default
        if rule.convert == "scrape_target" and present:
            value = scrape_target(present[0], value)
        if value == "$cluster":
            value = self.cluster
        if rule.convert == "gpu_profile" and present:
            profile = profile_for_gpu_name(value)
            value = profile.name if profile is not None else rule.default
        return value

    def _convert(
        self, row: FieldRow, value: FieldValue, tags: dict[str, str], point: Point
    ) -> FieldValue | Point | None:
        kind = row.convert
        if kind == "yes_no":
            return _YES[str(value).strip().lower()]
        if kind == "active_bit":
            if isinstance(value, str):
                return row.mask if _ACTIVE[value.strip().lower()] else 0
            return row.mask if _number(value) else 0
        number = _number(value)
        if kind == "nonzero":
            return number != 0
        if kind == "scale":
            declared = load_schema().field(row.reflex_measurement, row.reflex_field)
            # 87 % * 0.01 is 0.8700000000000001 but 87 / 100 is 0.87: divide by an integer.
            divisor = 1 / row.scale if 0 < row.scale < 1 else 0.0
            whole = divisor == round(divisor) and divisor > 1
            scaled = (number / divisor if whole else number * row.scale) + row.offset
            # A huge value times its unit: refused, not a crash (nor an int64 that overflows).
            if not math.isfinite(scaled) or (declared.type == "int" and abs(scaled) >= 2**63):
                raise ValueError(f"{value!r} x {row.scale} is out of range")
            return round(scaled) if declared.type == "int" else float(scaled)
        key = (tags["node"], tags.get("gpu", "-"), row.foreign_measurement, row.foreign_field)
        if kind == "rate":
            return self._rate(key, number, point.time_ns)
        previous = self._last.get(key)
        self._last[key] = number
        if kind == "advanced_bit":
            return row.mask if previous is not None and number > previous else 0
        return self._xid(int(number), previous, tags, point)  # xid_event

    def _rate(self, key: tuple[str, ...], seconds: float, time_ns: int) -> float | None:
        """The share of the time since the series' previous sample that its seconds counter
        grew by (stall seconds a second); nothing for a first sample or a counter that reset."""
        previous = self._last_at.get(key)
        self._last_at[key] = (seconds, time_ns)
        if previous is None or time_ns <= previous[1] or seconds < previous[0]:
            return None
        share = (seconds - previous[0]) / ((time_ns - previous[1]) / 1e9)
        # A millionth is finer than the kernel's avg10 (hundredths of a percent), and 50.4 - 50
        # over 10 s reads 0.04, not 0.039999999999999855. Scrape jitter can push it past 1.
        return min(round(share, 6), 1.0)

    def _xid(
        self, code: int, previous: float | None, tags: dict[str, str], point: Point
    ) -> Point | None:
        if code == 0 or code == previous:
            return None
        if previous is None:
            self.stats.stale_xids += 1
            return None
        event_tags = {k: tags[k] for k in ("cluster", "node")}
        event_tags |= {"source": "dcgm", "kind": "xid"}
        fields: dict[str, FieldValue] = {
            "code": code,
            "message": f"Xid {code} (dcgm-exporter DCGM_FI_DEV_XID_ERRORS)",
        }
        if tags.get("gpu", "").isdigit():
            fields["gpu"] = int(tags["gpu"])
        if point.tags.get("pci_bus_id"):
            fields["device"] = point.tags["pci_bus_id"]
        return validate(Point("event", event_tags, fields, point.time_ns))


_SCRAPER_ITSELF = ("localhost", "127.0.0.1", "::1")


def scrape_target(tag: str, value: str) -> str:
    """The node a Prometheus series is from: ``instance`` ("gpu-7:9100", "[fd00::7]:9100")
    without its port, "" when it is the scraper itself; any other tag as it is.

    >>> scrape_target("instance", "gpu-node-7:9100"), scrape_target("instance", "localhost:9100")
    ('gpu-node-7', '')
    """
    if tag != "instance":
        return value
    if value.startswith("["):  # an IPv6 address with its port
        host = value[1:].split("]", 1)[0]
    elif value.count(":") == 1:
        host = value.split(":", 1)[0]
    else:  # no port, or a bare IPv6 address
        host = value
    return "" if host in _SCRAPER_ITSELF else host


def _number(value: FieldValue) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError("not finite")
    return value


def _combine(fields: dict[str, FieldValue], row: FieldRow, value: FieldValue) -> None:
    """Several foreign fields into one Reflex field: bits OR-ed, counts summed (ECC errors of
    DRAM and SRAM); a flag or gauge is set once."""
    old = fields.get(row.reflex_field)
    if old is None or isinstance(value, bool):
        fields[row.reflex_field] = value
    elif load_schema().field(row.reflex_measurement, row.reflex_field).kind == "bitmask":
        fields[row.reflex_field] = int(old) | int(value)
    else:
        fields[row.reflex_field] = old + value  # type: ignore[operator]


def _samples(
    point: Point, table: MappingTable
) -> list[tuple[str, FieldRow | None, FieldValue]] | None:
    """``(foreign name, its row or None, value)`` for every value a point holds, whatever the
    shape; None when a metric-name point holds no value field."""
    if not table.prometheus:
        out: list[tuple[str, FieldRow | None, FieldValue]] = []
        qualifiers = table.qualifiers.get(point.measurement, ())
        for name, value in point.fields.items():
            row = table.row(point.measurement, name, point.tags)
            # Named as its row is: pressure.avg60 once, pressure.avg10{resource=cpu,type=full}
            # (no row) with the tags that would have picked one.
            plain = not qualifiers or (row is not None and row.foreign_field == name)
            picked = {q: point.tags.get(q, "") for q in qualifiers}
            out.append((name if plain else qualified_name(name, picked), row, value))
        return out
    if point.measurement in PROMETHEUS_MEASUREMENTS:
        return [(name, table.rows.get(name, {}).get("value"), value)
                for name, value in point.fields.items()]  # fmt: skip
    for name in _VALUE_FIELDS:
        if name in point.fields:
            row = table.rows.get(point.measurement, {}).get("value")  # None: a new DCGM_FI_*
            return [(point.measurement, row, point.fields[name])]
    return None


def _source_name(point: Point, name: str) -> str:
    return name if name == point.measurement else f"{point.measurement}.{name}"


# Tag sections repeat (one per GPU or port) and escapes make them slow to split: read each once.
@lru_cache(maxsize=1 << 14)
def _tag_section(section: str) -> dict[str, str]:
    return _parse_pairs(section, values=False)


def parse_line(line: str) -> Point:
    """One line of line protocol as it is, unchecked against the schema (foreign measurements
    are not in it); raises PointError. The codec's own splitting and unescaping, so that a
    foreign line reads exactly as InfluxDB reads it."""
    line = line.rstrip("\n")
    split = _HEAD.fullmatch(line)  # the head ends at the first unescaped space
    if split is None:
        raise PointError("expected 'measurement,tags fields time'", code="bad_sections")
    rest = split.group(2)
    plain = "\\" not in rest and '"' not in rest  # fast path, as the codec's
    sections = [
        split.group(1),
        *(rest.split(" ") if plain else _split_escaped(rest, " ", quotes=True)),
    ]
    if len(sections) != 3:
        raise PointError("expected 'measurement,tags fields time'", code="bad_sections")
    head = _HEAD_TAGS.fullmatch(sections[0]).groups()  # type: ignore[union-attr]
    measurement = _unescape_key(head[0])
    head = head if head[1] is not None else head[:1]
    try:
        tags = dict(_tag_section(head[1])) if len(head) > 1 else {}
        fields = _parse_pairs(sections[1], values=True)
        time_ns = int(sections[2])
    except PointError as error:
        raise PointError(error.reason, measurement, error.field, code=error.code) from None
    except ValueError:
        raise PointError(f"bad timestamp {sections[2]!r}", measurement,
                         code="bad_timestamp") from None  # fmt: skip
    return Point(measurement, tags, fields, time_ns)
