"""The one reader from InfluxDB to frames: Flux queries answered in annotated CSV, read
column by column into :class:`Frame` s. The flow's production source and the incident report
both read through it.

Pivoted answers (``pivot(rowKey: ["_time"], columnKey: ["_field"], ...)``) become one frame per
measurement and set of present fields; group-key columns become tags.

>>> rows = [["#datatype", "string", "long", "dateTime:RFC3339", "string", "string", "double"],
...         ["#group", "false", "false", "false", "true", "true", "false"],
...         ["", "result", "table", "_time", "_measurement", "node", "load1"],
...         ["", "_result", "0", "2024-01-01T00:00:00Z", "host", "n1", "0.5"]]
>>> [(f.measurement, f.tags["node"].tolist(), f.fields["load1"].tolist())
...  for f in frames_from_csv(rows)]
[('host', ['n1'], [0.5])]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import numpy as np
from influxdb_client import InfluxDBClient
from influxdb_client.domain.dialect import Dialect

from reflex_localize.influx.config import InfluxSettings
from reflex_localize.influx.connection import connect
from reflex_localize.schemas.frame import Frame

_DIALECT = Dialect(
    header=True,
    delimiter=",",
    comment_prefix="#",
    annotations=["datatype", "group"],
    date_time_format="RFC3339Nano",
)
_SKIPPED_COLUMNS = frozenset({"", "result", "table", "_start", "_stop", "_time", "_measurement"})


class FluxQueryError(RuntimeError):
    """InfluxDB answered a query with an error in the middle of its stream."""


class FluxReader:
    """Flux queries against one InfluxDB, their answers as CSV rows or frames.

    ``params`` are bound by the client as Flux variables (``bucket``, ``start``...), never
    spliced into the text; values that must be spliced go through
    :func:`reflex_localize.influx.flux_literals.flux_string`.
    """

    def __init__(self, settings: InfluxSettings) -> None:
        self.settings = settings
        self.client: InfluxDBClient = connect(settings)
        self._query = self.client.query_api()

    def __repr__(self) -> str:  # the settings' repr already keeps the token out
        return f"FluxReader({self.settings!r})"

    def csv(self, flux: str, params: Mapping[str, object] | None = None) -> Iterator[list[str]]:
        """The answer's rows, annotations included, streamed as they arrive."""
        return iter(self._query.query_csv(flux, dialect=_DIALECT, params=dict(params or {})))

    def frames(self, flux: str, params: Mapping[str, object] | None = None) -> Iterator[Frame]:
        """The frames of a pivoted query."""
        return frames_from_csv(self.csv(flux, params))

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> FluxReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def frames_from_csv(rows: Iterable[list[str]]) -> Iterator[Frame]:
    """Frames from a pivoted Flux result in annotated CSV.

    Each block of the CSV has one column set; rows whose fields are all present become one
    frame per measurement, rows with gaps one frame per set of present fields (a frame has one
    field set, see :class:`Frame`).
    """
    datatypes: list[str] = []
    groups: list[str] = []
    header: list[str] = []
    block: list[list[str]] = []
    for row in rows:
        if not row:
            continue
        first = row[0]
        if first == "#datatype":
            yield from _block_frames(header, datatypes, groups, block)
            datatypes, header, block = row, [], []
        elif first == "#group":
            groups = row
        elif not header:
            header = row
            if "error" in header and "reference" in header:
                raise FluxQueryError("the query failed mid-stream")
        else:
            block.append(row)
    yield from _block_frames(header, datatypes, groups, block)


def _block_frames(
    header: list[str], datatypes: list[str], groups: list[str], block: list[list[str]]
) -> Iterator[Frame]:
    if not block:
        return
    columns = list(zip(*block, strict=True))
    at = {name: i for i, name in enumerate(header)}
    measurements = np.array(columns[at["_measurement"]], dtype=object)
    times = parse_times(columns[at["_time"]])
    tag_names = [
        n for i, n in enumerate(header) if groups[i] == "true" and n not in _SKIPPED_COLUMNS
    ]
    field_names = [
        n for i, n in enumerate(header) if groups[i] != "true" and n not in _SKIPPED_COLUMNS
    ]
    raw = {n: np.array(columns[at[n]], dtype=object) for n in field_names}
    present = np.array([raw[n] != "" for n in field_names]).reshape(len(field_names), -1)
    for measurement in np.unique(measurements).tolist():
        mine = measurements == measurement
        patterns, inverse = np.unique(present[:, mine], axis=1, return_inverse=True)
        for p in range(patterns.shape[1]):
            rows = np.flatnonzero(mine)[inverse.reshape(-1) == p]
            names = [n for n, has in zip(field_names, patterns[:, p], strict=True) if has]
            if not names:
                continue
            fields = {n: _typed(raw[n][rows], datatypes[at[n]]) for n in names}
            tags = {n: np.array(columns[at[n]], dtype=object)[rows] for n in tag_names}
            yield Frame(measurement, times[rows], tags, fields)


def _typed(cells: np.ndarray, datatype: str) -> np.ndarray:
    if datatype == "double":
        return cells.astype(np.float64)
    if datatype in ("long", "unsignedLong"):
        return cells.astype(np.int64)
    if datatype == "boolean":
        return cells == "true"
    return cells.astype(str).astype(object)


def parse_times(cells: tuple[str, ...]) -> np.ndarray:
    """RFC3339 (UTC, ``Z``) to int64 ns; numpy parses ISO 8601 without the zone suffix."""
    stripped = np.array([c[:-1] if c.endswith("Z") else c for c in cells])
    return stripped.astype("datetime64[ns]").astype(np.int64)
