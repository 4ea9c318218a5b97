"""The line-protocol codec: random valid points round-trip; every contract breach is refused
with an error that names the measurement and the field."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reflex_localize.influx.local_server import InfluxServer
from reflex_localize.schemas.codec import (
    MAX_TIME_NS,
    DecodeReport,
    Point,
    PointError,
    decode,
    decode_lines,
    encode,
    validate,
)
from reflex_localize.schemas.contract import FieldSpec, load_schema

SCHEMA = load_schema()
MEASUREMENTS = sorted(SCHEMA.measurements)

# Tag values may hold anything line protocol can carry; line breaks, and a backslash before a
# space, comma or equals sign or at the end, cannot be written and are refused (tested below).
tag_values = st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), min_size=1).filter(
    lambda text: not re.search(r"\\([ ,=]|$)", text)
)
string_values = st.text(st.characters(codec="utf-8", exclude_characters="\n\r"))
timestamps = st.integers(min_value=0, max_value=MAX_TIME_NS)


def value_strategy(spec: FieldSpec) -> st.SearchStrategy:
    return {
        "float": st.floats(allow_nan=False, allow_infinity=False),
        "int": st.integers(min_value=-(2**63), max_value=2**63 - 1),
        "bool": st.booleans(),
        "string": string_values,
    }[spec.type]


@st.composite
def valid_points(draw: st.DrawFn) -> Point:
    spec = SCHEMA.measurements[draw(st.sampled_from(MEASUREMENTS))]
    names = draw(st.lists(st.sampled_from(sorted(spec.fields)), min_size=1, unique=True))
    fields = {name: draw(value_strategy(spec.fields[name])) for name in names}
    tags = {tag: draw(tag_values) for tag in spec.tags}
    return Point(spec.name, tags, fields, draw(timestamps))


@settings(max_examples=400, deadline=None)
@given(valid_points())
def test_valid_points_round_trip(point):
    assert decode(encode(point)) == validate(point)


@settings(max_examples=200, deadline=None)
@given(valid_points())
def test_encoding_is_one_line_with_a_timestamp(point):
    line = encode(point)
    assert "\n" not in line and line.endswith(f" {point.time_ns}")


def test_escaping_of_tags_and_strings_is_exact():
    point = Point(
        "event",
        {"cluster": "c 1", "node": "n,2=x", "source": 'say "hi"', "kind": "a\\b"},
        {"message": 'NVRM: Xid 79, "fell off" \\bus\\', "code": 79},
        5,
    )
    line = encode(point)
    assert line.startswith('event,cluster=c\\ 1,kind=a\\b,node=n\\,2\\=x,source=say\\ "hi"')
    assert 'message="NVRM: Xid 79, \\"fell off\\" \\\\bus\\\\"' in line
    assert decode(line) == validate(point)


def test_int_values_of_float_fields_become_floats():
    point = validate(Point("host", {"cluster": "c", "node": "n"}, {"load1": 2}, 1))
    assert point.fields["load1"] == 2.0 and isinstance(point.fields["load1"], float)
    assert decode("host,cluster=c,node=n load1=2 1").fields["load1"] == 2.0


HOST_TAGS = {"cluster": "c", "node": "n"}


@pytest.mark.parametrize(
    "point, where, reason",
    [
        (Point("gpux", HOST_TAGS, {"a": 1.0}, 1), ("gpux", ""), "undeclared measurement"),
        (Point("host", HOST_TAGS, {"load_99": 1.0}, 1), ("host", "load_99"), "undeclared field"),
        (Point("host", HOST_TAGS, {"load1": "high"}, 1), ("host", "load1"), "expected float"),
        (Point("host", HOST_TAGS, {"load1": True}, 1), ("host", "load1"), "expected float"),
        (Point("host", HOST_TAGS, {"procs_running": 1.5}, 1), ("host", "procs_running"), "int"),
        (Point("host", HOST_TAGS, {"procs_running": 2**63}, 1), ("host", "procs_running"), "64"),
        (Point("nic", HOST_TAGS | {"device": "e"}, {"up": 1}, 1), ("nic", "up"), "expected bool"),
        (Point("host", HOST_TAGS, {"load1": math.nan}, 1), ("host", "load1"), "not finite"),
        (Point("host", HOST_TAGS, {"load1": math.inf}, 1), ("host", "load1"), "not finite"),
        (Point("host", HOST_TAGS, {"load1": -math.inf}, 1), ("host", "load1"), "not finite"),
        (Point("host", {"cluster": "c"}, {"load1": 1.0}, 1), ("host", "node"), "missing"),
        (Point("host", {"cluster": "c", "node": ""}, {"load1": 1.0}, 1), ("host", "node"), "empty"),
        (Point("host", HOST_TAGS | {"row": "r"}, {"load1": 1.0}, 1), ("host", "row"), "tag"),
        (Point("host", HOST_TAGS, {}, 1), ("host", ""), "at least one field"),
        (Point("host", HOST_TAGS, {"load1": 1.0}, -1), ("host", ""), "timestamp"),
        (Point("host", HOST_TAGS, {"load1": 1.0}, 2**63 - 1), ("host", ""), "timestamp"),
        (
            Point("event", {"cluster": "c", "node": "n", "source": "s", "kind": "k"},
                  {"message": "two\nlines"}, 1),
            ("event", "message"),
            "line breaks",
        ),
    ],
)  # fmt: skip
def test_contract_breaches_are_refused_with_where_and_why(point, where, reason):
    with pytest.raises(PointError) as raised:
        encode(point)
    error = raised.value
    assert (error.measurement, error.field) == where
    assert reason in str(error)
    assert str(error).startswith(".".join(part for part in where if part))


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "ends\\", "", "a\\,b", "a\\ b", "a\\=b"])
def test_tag_values_that_would_break_line_protocol_are_refused(bad):
    with pytest.raises(PointError) as raised:
        encode(Point("host", {"cluster": "c", "node": bad}, {"load1": 1.0}, 1))
    assert (raised.value.measurement, raised.value.field) == ("host", "node")


@given(
    st.sampled_from(["utilization_gpu_ratio", "power_watts", "temperature_celsius"]),
    st.sampled_from([math.nan, math.inf, -math.inf]),
)
def test_non_finite_floats_are_refused_in_every_float_field(name, value):
    tags = {"cluster": "c", "node": "n", "gpu": "0", "profile": "p"}
    with pytest.raises(PointError) as raised:
        validate(Point("gpu", tags, {name: value}, 1))
    assert raised.value.field == name


@settings(deadline=None)
@given(st.text(max_size=80))
def test_decoding_garbage_raises_point_error_or_returns_a_valid_point(text):
    try:
        point = decode(text)
    except PointError:
        return
    assert validate(point) == point


def test_decode_lines_counts_bad_lines_by_reason():
    report = DecodeReport()
    lines = [
        "host,cluster=c,node=n load1=1 1",
        "# a comment",
        "host,cluster=c,node=n load1=nan 2",
        "host,cluster=c,node=n load1=1",
        "nothing here",
    ]
    points = list(decode_lines(lines, report))
    assert len(points) == 1 and report.accepted == 1
    assert report.rejected_total == 3
    assert [number for number, _ in report.examples] == [3, 4, 5]


def test_a_repeated_tag_is_refused_as_influxdb_refuses_it() -> None:
    with pytest.raises(PointError, match="duplicate tag 'node'"):
        decode("host,cluster=c,node=a,node=b load1=0.5 1")
    # A repeated field is something InfluxDB stores, the last value winning: so do we.
    assert decode("host,cluster=c,node=a load1=0.5,load1=0.7 1").fields == {"load1": 0.7}


@pytest.mark.influx
def test_the_server_agrees_on_repeated_tags_and_fields(influx: InfluxServer) -> None:
    from influxdb_client import InfluxDBClient
    from influxdb_client.client.write_api import SYNCHRONOUS
    from influxdb_client.rest import ApiException

    with InfluxDBClient(influx.url, influx.token, org=influx.org) as client:
        write = client.write_api(write_options=SYNCHRONOUS)
        with pytest.raises(ApiException, match="duplicate tags"):
            write.write(influx.bucket, influx.org, "host,cluster=c,node=a,node=b load1=0.5 1")
        write.write(influx.bucket, influx.org, "host,cluster=c,node=dup load1=0.5,load1=0.7 2")
    rows = influx.query_rows(
        f'from(bucket: "{influx.bucket}") |> range(start: 0) |> filter(fn: (r) => r.node == "dup")'
    )
    assert [row["_value"] for row in rows] == [0.7]
