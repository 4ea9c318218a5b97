"""Columnar batches of points: how telemetry moves inside Reflex without per-point Python.

A :class:`Frame` holds many points of one measurement that share one set of fields, as numpy
columns. The simulator produces frames, the flow consumes them, and :func:`validate_frame`
checks a whole frame against the schema with array operations (types, finite numbers, tag
values, plausible ranges: :mod:`schemas.ranges`), splitting off bad rows with a reason each
instead of dropping them.

>>> import numpy as np
>>> tags = {"cluster": np.array(["c", "c"], dtype=object),
...         "node": np.array(["a", "b"], dtype=object)}
>>> f = Frame("host", np.array([1, 2], dtype=np.int64), tags,
...           {"load1": np.array([0.5, np.nan])})
>>> good, bad = validate_frame(f)
>>> len(good), [(error.code, str(error)) for _, error in bad]
(1, [('not_finite', 'host.load1: nan is not finite (InfluxDB would drop it)')])
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from reflex_localize.schemas.codec import (
    SITE_TAGS,
    Point,
    PointError,
    checked_tag_value,
    encode,
    validate,
)
from reflex_localize.schemas.contract import Schema, load_schema
from reflex_localize.schemas.ranges import out_of_range

_NUMPY_KIND = {"float": "f", "int": "i", "bool": "b", "string": "O"}


@dataclass
class Frame:
    measurement: str
    time_ns: np.ndarray  # int64, shape (n,)
    tags: dict[str, np.ndarray]  # object arrays of str, shape (n,)
    fields: dict[str, np.ndarray]  # one dtype per declared type, shape (n,)
    # Where a decoder read the tags as codes: per tag, its values (object array, each value
    # once; a value may have no row) and each row's code: tags[name] is values[codes]. The flow
    # groups rows by the codes instead of factorizing the column again (flows/signals/derive.py:
    # factorized_tag), and a frame that crosses processes is pickled as codes, not as a str
    # per row. A sub-frame (take) keeps them; a frame made any other way has none.
    tag_codes: dict[str, tuple[np.ndarray, np.ndarray]] | None = field(
        default=None, compare=False, repr=False
    )

    def __len__(self) -> int:
        return len(self.time_ns)

    def take(self, rows: np.ndarray) -> Frame:
        """The sub-frame of ``rows`` (a boolean mask or index array)."""
        codes = self.tag_codes
        return Frame(
            self.measurement,
            self.time_ns[rows],
            {key: column[rows] for key, column in self.tags.items()},
            {key: column[rows] for key, column in self.fields.items()},
            None if codes is None else {k: (v, c[rows]) for k, (v, c) in codes.items()},
        )

    def __getstate__(self) -> dict:
        """Pickled with the tags that have codes left out (rebuilt from them on load): a
        column of str pickles an object per row, its codes one int64 buffer."""
        state = dict(self.__dict__)
        if self.tag_codes is not None:
            coded = self.tag_codes
            state["tags"] = [(k, None if k in coded else v) for k, v in self.tags.items()]
        return state

    def __setstate__(self, state: dict) -> None:
        tags = state["tags"]
        if isinstance(tags, list):  # (name, column, or None where its codes rebuild it)
            coded = state["tag_codes"]
            state["tags"] = {
                k: coded[k][0][coded[k][1]] if v is None else v for k, v in tags
            }  # fmt: skip
        state.setdefault("tag_codes", None)  # a frame pickled before codes were kept
        self.__dict__.update(state)

    def points(self) -> Iterator[Point]:
        tag_names, field_names = list(self.tags), list(self.fields)
        tag_columns = [self.tags[k] for k in tag_names]
        field_columns = [self.fields[k].tolist() for k in field_names]
        times = self.time_ns.tolist()
        for row in range(len(times)):
            yield Point(
                self.measurement,
                {k: str(c[row]) for k, c in zip(tag_names, tag_columns, strict=True)},
                {k: c[row] for k, c in zip(field_names, field_columns, strict=True)},
                times[row],
            )

    def lines(self, schema: Schema | None = None) -> list[str]:
        return [encode(point, schema) for point in self.points()]


def frames_from_points(points: Iterable[Point], schema: Schema | None = None) -> list[Frame]:
    """Groups points by measurement and field set into frames with schema dtypes."""
    schema = schema or load_schema()
    groups: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[Point]] = defaultdict(list)
    for point in points:
        groups[(point.measurement, tuple(point.tags), tuple(point.fields))].append(point)
    frames = []
    for (measurement, tag_names, field_names), members in groups.items():
        spec = schema.measurement(measurement)
        fields: dict[str, np.ndarray] = {}
        for name in field_names:
            kind = _NUMPY_KIND[spec.fields[name].type]
            values = [p.fields[name] for p in members]
            fields[name] = np.array(values, dtype=object if kind == "O" else _dtype(kind))
        frames.append(
            Frame(
                measurement,
                np.array([p.time_ns for p in members], dtype=np.int64),
                {
                    name: np.array([p.tags[name] for p in members], dtype=object)
                    for name in tag_names
                },
                fields,
            )
        )
    return frames


def _dtype(kind: str) -> type:
    return {"f": np.float64, "i": np.int64, "b": np.bool_}[kind]


def validate_frame(
    frame: Frame, schema: Schema | None = None, *, carry_tags: bool = False
) -> tuple[Frame, list[tuple[Point | None, PointError]]]:
    """Returns the rows that obey the schema, and each rejected row with its reason.
    ``carry_tags``: undeclared tag columns are carried, not refused (see codec.validate)."""
    schema = schema or load_schema()
    try:
        spec = schema.measurement(frame.measurement)
    except KeyError:
        undeclared = PointError(
            "undeclared measurement", frame.measurement, code="undeclared_measurement"
        )
        return frame.take(np.zeros(len(frame), dtype=bool)), [(None, undeclared)] * len(frame)
    problem = _column_problem(frame, schema, carry_tags)
    if problem is not None:
        return frame.take(np.zeros(len(frame), dtype=bool)), [(None, problem)] * len(frame)
    bad = np.zeros(len(frame), dtype=bool)
    reasons: dict[int, PointError] = {}
    for name, column in frame.fields.items():
        if spec.fields[name].type == "float":
            broken = ~np.isfinite(column)
            for row in np.flatnonzero(broken & ~bad):
                reasons[int(row)] = PointError(
                    f"{float(column[row])!r} is not finite (InfluxDB would drop it)",
                    frame.measurement,
                    name,
                    code="not_finite",
                )
            bad |= broken
    for name, column in frame.tags.items():
        known = frame.tag_codes.get(name) if frame.tag_codes is not None else None
        bad_rows = (
            _bad_tag_rows(column, frame.measurement, name)
            if known is None
            else _bad_coded_rows(*known, frame.measurement, name)
        )
        for tag_row, why in bad_rows.items():
            if not bad[tag_row]:
                reasons[tag_row], bad[tag_row] = why, True
    for range_row, why in out_of_range(
        frame.measurement, frame.tags, frame.fields, schema
    ).items():  # a value no sensor reads
        if not bad[range_row]:
            reasons[range_row], bad[range_row] = why, True
    if not bad.any():
        return frame, []
    rejected = frame.take(bad)
    rejected_points = list(rejected.points())
    return frame.take(~bad), [
        (p, reasons[int(r)]) for p, r in zip(rejected_points, np.flatnonzero(bad), strict=True)
    ]


def _bad_tag_rows(column: np.ndarray, measurement: str, tag: str) -> dict[int, PointError]:
    """Rows whose tag value the codec would refuse (missing, empty, a line break, a backslash
    line protocol cannot carry), with the codec's reason. Tags repeat a lot, so the distinct
    values are checked (a set is built at C speed) and rows looked up only if needed."""
    if column.dtype != object:
        return {}
    values = column.tolist()
    try:
        distinct = set(values)
    except TypeError:  # an unhashable value: check row by row
        problems = (_tag_problem(v, measurement, tag) for v in values)
        return {row: why for row, why in enumerate(problems) if why is not None}
    why = {v: r for v in distinct if (r := _tag_problem(v, measurement, tag)) is not None}
    if not why:
        return {}
    return {row: why[v] for row, v in enumerate(values) if v in why}


def _bad_coded_rows(
    distinct: np.ndarray, codes: np.ndarray, measurement: str, tag: str
) -> dict[int, PointError]:
    """:func:`_bad_tag_rows` of a column the decoder gave as codes: its distinct values are
    checked, and rows looked up only if one is refused."""
    why = {
        code: r
        for code, value in enumerate(distinct.tolist())
        if (r := _tag_problem(value, measurement, tag)) is not None
    }
    if not why:
        return {}
    return {row: why[code] for row, code in enumerate(codes.tolist()) if code in why}


def _tag_problem(value: object, measurement: str, tag: str) -> PointError | None:
    try:
        checked_tag_value(value, measurement, tag)
    except PointError as error:
        return error
    return None


def _column_problem(frame: Frame, schema: Schema, carry_tags: bool) -> PointError | None:
    spec = schema.measurement(frame.measurement)
    m = frame.measurement
    for name in spec.tags:
        if name not in frame.tags:
            return PointError("missing or empty tag", m, name, code="missing_tag")
    for name in () if carry_tags else frame.tags:
        if name not in spec.tags and name not in SITE_TAGS:
            return PointError("undeclared tag", m, name, code="undeclared_tag")
    if not frame.fields:
        return PointError("a point needs at least one field", m, code="no_fields")
    for name, column in frame.fields.items():
        declared = spec.fields.get(name)
        if declared is None:
            return PointError("undeclared field", m, name, code="undeclared_field")
        if column.dtype.kind != _NUMPY_KIND[declared.type]:
            wrong = f"expected {declared.type} column, got dtype {column.dtype}"
            return PointError(wrong, m, name, code="wrong_type")
    return None


def validate_points(
    points: Iterable[Point], schema: Schema | None = None
) -> tuple[list[Point], list[tuple[Point, str]]]:
    good, bad = [], []
    for point in points:
        try:
            good.append(validate(point, schema))
        except PointError as error:
            bad.append((point, str(error)))
    return good, bad
