"""Typed points to InfluxDB line protocol and back, checked against the schema.

Every point that leaves a collector or a flow passes :func:`validate`. It catches what
influxdb-client would otherwise swallow (a NaN field is silently dropped there) or what the
server would reject later (a field changing type), and names the measurement and field.

>>> from reflex_localize.schemas.codec import Point, encode, decode
>>> p = Point("gpu", {"cluster": "c1", "node": "n 1", "gpu": "0", "profile": "h100-sxm5-80gb"},
...           {"power_watts": 512.5, "sm_clock_mhz": 1980}, 1_700_000_000_000_000_000)
>>> print(encode(p).replace(" power", "\\n   power"))
gpu,cluster=c1,gpu=0,node=n\\ 1,profile=h100-sxm5-80gb
   power_watts=512.5,sm_clock_mhz=1980i 1700000000000000000
>>> line = encode(p)
>>> decode(line) == p
True
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from reflex_localize.schemas.contract import Schema, load_schema

FieldValue = float | int | bool | str
# Optional tags any point may carry, writers included: where its node sits (schemas/site_tags.py;
# the agent adds them from its [identity]). Not part of any measurement's key.
SITE_TAGS = ("rack", "switch")
MAX_TIME_NS = 2**63 - 2  # InfluxDB refuses 2**63 - 1 ("time outside range")
# The longest line Reflex reads. Its own lines are under a kilobyte, an event's message or an
# event's suspects a few; a longer one is a broken or hostile source, refused before it costs
# time (a 50 MB line took 25 s and 1.2 GB) and read past by the file readers (line_file.py).
MAX_LINE_CHARS = 1 << 20
# InfluxDB unescapes only "\,", "\ " and "\=" in tags and takes any other backslash literally,
# so a backslash before one of those characters, or at the very end, cannot be written.
_UNWRITABLE_BACKSLASH = re.compile(r"\\([ ,=]|$)")


class PointError(ValueError):
    """A point breaks the contract. ``measurement`` and ``field`` say where; ``code`` is a
    fixed name for the kind of break, so that rejects can be totalled (the reason quotes the
    bad value, and there are as many reasons as bad values)."""

    def __init__(
        self, reason: str, measurement: str = "", field: str = "", *, code: str = "invalid_point"
    ) -> None:
        where = ".".join(part for part in (measurement, field) if part)
        super().__init__(f"{where}: {reason}" if where else reason)
        self.reason, self.measurement, self.field, self.code = reason, measurement, field, code


@dataclass(frozen=True)
class Point:
    measurement: str
    tags: Mapping[str, str]
    fields: Mapping[str, FieldValue]
    time_ns: int


def validate(point: Point, schema: Schema | None = None, *, carry_tags: bool = False) -> Point:
    """Returns ``point`` with int values in float fields made floats; raises PointError.

    ``carry_tags``: a tag the schema does not declare (Telegraf's ``host``, a site's ``rack``)
    is carried instead of refused, as readers of the world's data must; writers refuse it."""
    schema = schema or load_schema()
    name = point.measurement
    if name not in schema.measurements:
        raise PointError("undeclared measurement", name, code="undeclared_measurement")
    spec = schema.measurements[name]
    for tag in spec.tags:
        checked_tag_value(point.tags.get(tag), name, tag)
    for tag in () if carry_tags else point.tags:
        if tag not in spec.tags and tag not in SITE_TAGS:
            raise PointError("undeclared tag", name, tag, code="undeclared_tag")
    if not point.fields:
        raise PointError("a point needs at least one field", name, code="no_fields")
    fields: dict[str, FieldValue] = {}
    for key, field_value in point.fields.items():
        declared = spec.fields.get(key)
        if declared is None:
            raise PointError("undeclared field", name, key, code="undeclared_field")
        fields[key] = checked_value(field_value, declared.type, name, key)
    time_ns = point.time_ns
    if not isinstance(time_ns, int) or isinstance(time_ns, bool) or not 0 <= time_ns <= MAX_TIME_NS:
        raise PointError(
            f"timestamp {time_ns!r} is not an int of ns in [0, {MAX_TIME_NS}]", name,
            code="bad_timestamp",
        )  # fmt: skip
    return Point(name, dict(point.tags), fields, point.time_ns)


def checked_tag_value(value: object, measurement: str, tag: str) -> str:
    """Returns ``value`` if line protocol can carry it as a tag value; raises PointError."""
    if not isinstance(value, str) or not value:
        raise PointError("missing or empty tag", measurement, tag, code="missing_tag")
    if "\n" in value or "\r" in value or _UNWRITABLE_BACKSLASH.search(value):
        raise PointError(
            f"tag value {value!r} cannot be written in line protocol", measurement, tag,
            code="unwritable_tag",
        )  # fmt: skip
    return value


def checked_value(value: object, declared: str, measurement: str, key: str) -> FieldValue:
    """Returns a field value of the ``declared`` type (ints made floats); raises PointError."""
    if declared == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PointError(
                f"expected float, got {type(value).__name__}", measurement, key, code="wrong_type"
            )
        if not math.isfinite(value):
            raise PointError(
                f"{value!r} is not finite (InfluxDB would drop it)", measurement, key,
                code="not_finite",
            )  # fmt: skip
        return float(value)
    if declared == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise PointError(
                f"expected int, got {type(value).__name__}", measurement, key, code="wrong_type"
            )
        if not -(2**63) <= value < 2**63:
            raise PointError(
                f"{value} does not fit a signed 64-bit int", measurement, key, code="int_overflow"
            )
        return value
    if declared == "bool":
        if not isinstance(value, bool):
            raise PointError(
                f"expected bool, got {type(value).__name__}", measurement, key, code="wrong_type"
            )
        return value
    if not isinstance(value, str):
        raise PointError(
            f"expected string, got {type(value).__name__}", measurement, key, code="wrong_type"
        )
    if "\n" in value or "\r" in value:
        raise PointError(
            "string values cannot hold line breaks", measurement, key, code="string_line_break"
        )
    return value


# InfluxDB's own escape sets (models/points.go), the one definition in Reflex: the frame
# encoder (schemas/frame_codec.py) uses these functions, and the training hook, which may only
# import the standard library, carries a copy that tests/test_hostile_tags.py holds to them.
# A backslash itself is never escaped in measurements, tag keys, tag values and field keys;
# only in string field values, where it goes first so the escapes it adds stay single.
MEASUREMENT_ESCAPES = ((",", "\\,"), (" ", "\\ "))
KEY_ESCAPES = ((",", "\\,"), ("=", "\\="), (" ", "\\ "))  # tag keys and values, field keys
STRING_ESCAPES = (("\\", "\\\\"), ('"', '\\"'))


def _escaped(text: str, table: tuple[tuple[str, str], ...]) -> str:
    for raw, escaped in table:
        text = text.replace(raw, escaped)
    return text


# Cached because names and tag values are few (low cardinality by design) and encoding is hot.
@lru_cache(maxsize=1 << 16)
def escape_key(text: str) -> str:
    """A tag key, tag value or field key as line protocol writes it."""
    return _escaped(text, KEY_ESCAPES)


@lru_cache(maxsize=1 << 10)
def escape_measurement(text: str) -> str:
    return _escaped(text, MEASUREMENT_ESCAPES)


# One formatter per field type; the frame encoder maps them over whole columns.
def format_float(value: float) -> str:
    return repr(value)  # the shortest text that reads back as the same float


def format_int(value: int) -> str:
    return f"{value}i"


def format_bool(value: bool) -> str:
    return "true" if value else "false"


def format_string(text: str) -> str:
    return '"' + _escaped(text, STRING_ESCAPES) + '"'


def format_value(value: FieldValue) -> str:
    if isinstance(value, bool):
        return format_bool(value)
    if isinstance(value, int):
        return format_int(value)
    if isinstance(value, float):
        return format_float(value)
    return format_string(value)


def encode(point: Point, schema: Schema | None = None) -> str:
    """One line of line protocol for a point, after validating it."""
    point = validate(point, schema)
    head = escape_measurement(point.measurement)
    tags = "".join(
        f",{escape_key(key)}={escape_key(point.tags[key])}" for key in sorted(point.tags)
    )
    fields = ",".join(f"{escape_key(key)}={format_value(v)}" for key, v in point.fields.items())
    return f"{head}{tags} {fields} {point.time_ns}"


def encode_many(points: Iterable[Point], schema: Schema | None = None) -> str:
    return "".join(encode(point, schema) + "\n" for point in points)


# ---- decoding -------------------------------------------------------------------------------


def _split_escaped(
    text: str, separator: str, *, quotes: bool = False, limit: int = -1
) -> list[str]:
    """Splits on ``separator`` outside backslash escapes (and outside "..." when ``quotes``)."""
    parts: list[str] = []
    current: list[str] = []
    index, quoted = 0, False
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            current.append(text[index : index + 2])
            index += 2
            continue
        if quotes and char == '"':
            quoted = not quoted
        if char == separator and not quoted and (limit < 0 or len(parts) < limit):
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    if quoted:
        raise PointError("unterminated string value", code="unterminated_string")
    parts.append("".join(current))
    return parts


def _unescape_key(text: str) -> str:
    """As InfluxDB's unescapeTag: only "\\,", "\\ " and "\\=" lose their backslash."""
    if "\\" not in text:
        return text
    for raw, escaped in KEY_ESCAPES:
        text = text.replace(escaped, raw)
    return text


def _unescape_string(text: str) -> str:
    """As InfluxDB's unescapeStringField: "\\\\" and '\\"' lose a backslash, nothing else."""
    if "\\" not in text:
        return text
    out, index = [], 0
    while index < len(text):
        if text[index] == "\\" and index + 1 < len(text) and text[index + 1] in '"\\':
            out.append(text[index + 1])
            index += 2
        else:
            out.append(text[index])
            index += 1
    return "".join(out)


def _parse_value(raw: str, key: str) -> FieldValue:
    if raw.startswith('"'):
        if len(raw) < 2 or not raw.endswith('"'):
            raise PointError(f"bad string value {raw!r}", field=key, code="bad_value")
        return _unescape_string(raw[1:-1])
    if raw in ("t", "T", "true", "True", "TRUE"):
        return True
    if raw in ("f", "F", "false", "False", "FALSE"):
        return False
    try:
        if raw[-1:] not in ("i", "u"):
            return float(raw)
        number = int(raw[:-1])
    except ValueError:
        raise PointError(f"bad value {raw!r}", field=key, code="bad_value") from None
    # InfluxDB refuses what does not fit its int64 (i) or uint64 (u); Python would carry it on
    # as a big int, and into a float field as an absurd float (99999999999999999999999i: 1e23).
    low, high, kind = (
        (-(2**63), 2**63 - 1, "signed") if raw[-1] == "i" else (0, 2**64 - 1, "unsigned")
    )
    if not low <= number <= high:
        raise PointError(
            f"integer {raw[:40]!r} does not fit a {kind} 64-bit int", field=key, code="int_overflow"
        )
    return number


def _parse_pairs(section: str, *, values: bool) -> dict:
    out: dict = {}
    # Fast path: with nothing escaped or quoted, plain str.split is exact (and ~30x faster).
    plain = "\\" not in section and '"' not in section
    pairs = section.split(",") if plain else _split_escaped(section, ",", quotes=values)
    for pair in pairs:
        kv = pair.split("=", 1) if plain else _split_escaped(pair, "=", quotes=values, limit=1)
        if len(kv) != 2 or not kv[0]:
            raise PointError(f"bad key=value {pair!r}", code="bad_key_value")
        key = _unescape_key(kv[0])
        if not values and key in out:
            # InfluxDB refuses the whole line ("duplicate tags"); a repeated field is kept last.
            raise PointError(f"duplicate tag {key!r}", code="duplicate_tag")
        out[key] = _parse_value(kv[1], key) if values else _unescape_key(kv[1])
    return out


def decode(line: str, schema: Schema | None = None, *, carry_tags: bool = False) -> Point:
    """Parses one line of line protocol into a validated Point; raises PointError.
    ``carry_tags`` as for :func:`validate`."""
    if len(line) - line.endswith("\n") > MAX_LINE_CHARS:  # before any copy of it is made
        raise PointError(
            f"a line of {len(line):,} characters, over the limit of {MAX_LINE_CHARS:,}",
            code="line_too_long",
        )
    line = line.rstrip("\n")
    if not line or line.isspace():
        raise PointError("empty line", code="empty_line")
    if "\\" not in line and '"' not in line:
        sections = line.split(" ")  # fast path: nothing escaped or quoted
    else:
        # Quotes delimit string field values only; in the measurement and tags they are plain
        # characters, so the head ends at the first unescaped space whatever quotes it holds.
        head_and_rest = _split_escaped(line, " ", limit=1)
        sections = head_and_rest[:1]
        if len(head_and_rest) > 1:
            sections += _split_escaped(head_and_rest[1], " ", quotes=True)
    if len(sections) not in (2, 3):
        raise PointError(
            f"expected 'measurement,tags fields [time]', got {len(sections)} sections",
            code="bad_sections",
        )
    head = (
        sections[0].split(",", 1)
        if "\\" not in sections[0]
        else _split_escaped(sections[0], ",", limit=1)
    )
    measurement = _unescape_key(head[0])
    try:
        tags = _parse_pairs(head[1], values=False) if len(head) > 1 else {}
        fields = _parse_pairs(sections[1], values=True)
    except PointError as error:
        raise PointError(error.reason, measurement, error.field, code=error.code) from None
    if len(sections) == 3:
        try:
            time_ns = int(sections[2])
        except ValueError:
            raise PointError(
                f"bad timestamp {sections[2]!r}", measurement, code="bad_timestamp"
            ) from None
    else:
        raise PointError(
            "a timestamp is required (Reflex never relies on server time)", measurement,
            code="no_timestamp",
        )  # fmt: skip
    point = _coerce(Point(measurement, tags, fields, time_ns), schema)
    return validate(point, schema, carry_tags=carry_tags)


def _coerce(point: Point, schema: Schema | None) -> Point:
    """Line protocol writes 1.0 as ``1`` only for floats; make such values match the schema."""
    schema = schema or load_schema()
    spec = schema.measurements.get(point.measurement)
    if spec is None:
        return point
    fields = dict(point.fields)
    for key, value in fields.items():
        declared = spec.fields.get(key)
        if (
            declared is not None
            and declared.type == "float"
            and isinstance(value, int)
            and not isinstance(value, bool)
        ):
            fields[key] = float(value)
    return Point(point.measurement, point.tags, fields, point.time_ns)


@dataclass
class DecodeReport:
    """What :func:`decode_lines` rejected, by reason: counted, never silently dropped."""

    accepted: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    examples: list[tuple[int, str]] = field(default_factory=list)

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())

    def reject(self, line_number: int, error: PointError) -> None:
        self.rejected[error.reason] = self.rejected.get(error.reason, 0) + 1
        if len(self.examples) < 20:
            self.examples.append((line_number, str(error)))


def decode_lines(
    lines: Iterable[str], report: DecodeReport, schema: Schema | None = None
) -> Iterator[Point]:
    """Decodes many lines, counting each bad one in ``report`` instead of raising."""
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            point = decode(line, schema)
        except PointError as error:
            report.reject(number, error)
            continue
        except Exception as error:
            report.reject(
                number, PointError(f"unparseable: {type(error).__name__}", code="unparseable")
            )
            continue
        report.accepted += 1
        yield point
