"""Where an incident report's timelines come from.

A report needs raw telemetry around one event: the suspect's signal, its job's peers, the
job's membership and step times, and the event log. A :class:`TimelineSource` answers one
question, "frames of this measurement in this time range, for these nodes or this job", from
three places:

- :class:`FrameSource`: frames in memory (the demo hands over what it simulated);
- :class:`ReplaySource`: a line-protocol file (an incident capture, ``reflex simulate --out``);
- :class:`InfluxSource`: InfluxDB, every value escaped into Flux, a timeout on every call.

>>> import numpy as np
>>> from reflex_localize.schemas.frame import Frame
>>> tags = {"cluster": np.array(["c", "c"], dtype=object),
...         "node": np.array(["a", "b"], dtype=object)}
>>> source = FrameSource([Frame("host", np.array([1, 5], dtype=np.int64), tags,
...                                 {"load1": np.array([0.5, 2.0])})])
>>> [len(f) for f in source.frames("host", 0, 3, nodes=["a"])]
[1]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from reflex_localize.influx.config import InfluxSettings
from reflex_localize.influx.flux_literals import flux_any_of, flux_string
from reflex_localize.influx.reader import FluxReader
from reflex_localize.schemas.codec import Point, PointError, decode
from reflex_localize.schemas.contract import load_schema
from reflex_localize.schemas.frame import Frame, frames_from_points
from reflex_localize.schemas.line_file import data_lines, line_stamp, raw_tag


class TimelineSource(Protocol):
    """What a report reads its telemetry from (the module's example uses a FrameSource)."""

    def frames(
        self,
        measurement: str,
        start_ns: int,
        end_ns: int,
        *,
        nodes: Sequence[str] | None = None,
        job: str | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[Frame]:
        """Rows of ``measurement`` with ``start_ns <= time < end_ns``, of ``nodes`` (tag
        ``node``) and ``job`` (tag ``job``) when given. ``fields`` names the fields the caller
        needs; a source may return more."""
        ...


def _keep(frame: Frame, start_ns: int, end_ns: int, nodes: Sequence[str] | None, job: str | None):
    mask = (frame.time_ns >= start_ns) & (frame.time_ns < end_ns)
    if nodes is not None and "node" in frame.tags:
        mask &= np.isin(frame.tags["node"], np.array(list(nodes), dtype=object))
    if job is not None and "job" in frame.tags:
        mask &= frame.tags["job"] == job
    return frame.take(mask) if mask.any() else None


class FrameSource:
    """Frames already in memory (the module's example)."""

    def __init__(self, frames: Iterable[Frame]) -> None:
        self._by_measurement: dict[str, list[Frame]] = {}
        for frame in frames:
            self._by_measurement.setdefault(frame.measurement, []).append(frame)

    def frames(
        self,
        measurement: str,
        start_ns: int,
        end_ns: int,
        *,
        nodes: Sequence[str] | None = None,
        job: str | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[Frame]:
        kept = (
            _keep(frame, start_ns, end_ns, nodes, job)
            for frame in self._by_measurement.get(measurement, [])
        )
        return [frame for frame in kept if frame is not None]


class ReplaySource:
    """A line-protocol file. Lines of other measurements, outside the range, or (by their raw
    tags, :func:`raw_tag`) of other nodes or jobs are skipped before decoding; lines that do
    not decode, or whose timestamp is not plain decimal nanoseconds, are counted in
    ``rejected``, not fatal.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "incident.lp"
    >>> _ = path.write_text("host,cluster=c,node=a load1=0.5 1\\n"
    ...                     "host,cluster=c,node=b load1=2.0 2\\n"
    ...                     "host,cluster=c,node=a load1=high 3\\n")
    >>> source = ReplaySource(path)
    >>> [len(f) for f in source.frames("host", 0, 10, nodes=["a"])], source.rejected
    ([1], 1)
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.rejected = 0

    def frames(
        self,
        measurement: str,
        start_ns: int,
        end_ns: int,
        *,
        nodes: Sequence[str] | None = None,
        job: str | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[Frame]:
        prefix = measurement + ","
        wanted_nodes = None if nodes is None else set(nodes)
        points: list[Point] = []
        for _, line in data_lines(self.path):
            if not line.startswith(prefix):
                continue
            time_ns = line_stamp(line)
            if time_ns is None:
                self.rejected += 1
                continue
            if not start_ns <= time_ns < end_ns or _plainly_unwanted(line, wanted_nodes, job):
                continue
            try:
                points.append(decode(line))
            except (PointError, ValueError, IndexError):
                self.rejected += 1
        kept = (_keep(f, start_ns, end_ns, nodes, job) for f in frames_from_points(points))
        return [frame for frame in kept if frame is not None]


def _plainly_unwanted(line: str, nodes: set[str] | None, job: str | None) -> bool:
    """Whether the line's raw tags already show it is of another node or job. Decoding is the
    slow part; a line whose tags cannot be read raw is decoded, and :func:`_keep` decides."""
    if nodes is not None:
        node = raw_tag(line, "node")
        if node is not None and node not in nodes:
            return True
    if job is not None:
        owner = raw_tag(line, "job")
        if owner is not None and owner != job:
            return True
    return False


class InfluxSource:
    """InfluxDB 2.x. Telemetry comes from the settings' bucket, Reflex's own ``reflex_*``
    outputs (baselines) from ``results_bucket``. Every call is bounded by the settings'
    timeout, and the token is kept out of ``repr``.

    InfluxDB OSS does not accept bind parameters (``params``; Cloud only: the server answers
    "undefined identifier params"), so every value reaches Flux through :func:`flux_string`,
    as a string literal with its escapes; times are integers.

    Nodes and fields are picked by ``==`` joined with ``or``, which InfluxDB pushes down to its
    storage; ``contains(value:, set:)`` is not, and read every node's series of the range to
    drop most of them: 15-17 s against 0.05-0.8 s for 420 s of 12 nodes' GPUs (2.9.1).

    >>> source = InfluxSource(InfluxSettings(url="http://influx:8086", bucket="telemetry"))
    >>> print(source.query("host", 0, 10, nodes=['a"b'], job=None))
    from(bucket: "telemetry")
      |> range(start: time(v: 0), stop: time(v: 10))
      |> filter(fn: (r) => r._measurement == "host")
      |> filter(fn: (r) => r.node == "a\\"b")
      |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")
    """

    def __init__(self, settings: InfluxSettings, *, results_bucket: str = "reflex") -> None:
        self.settings, self.results_bucket = settings, results_bucket

    def __repr__(self) -> str:
        return f"InfluxSource({self.settings!r}, results_bucket={self.results_bucket!r})"

    def query(
        self,
        measurement: str,
        start_ns: int,
        end_ns: int,
        nodes: Sequence[str] | None,
        job: str | None,
        fields: Sequence[str] | None = None,
    ) -> str:
        is_output = measurement.startswith("reflex_")
        bucket = self.results_bucket if is_output else self.settings.bucket
        lines = [
            f"from(bucket: {flux_string(bucket)})",
            f"  |> range(start: time(v: {int(start_ns)}), stop: time(v: {int(end_ns)}))",
            f"  |> filter(fn: (r) => r._measurement == {flux_string(measurement)})",
        ]
        if nodes is not None:
            lines.append(f"  |> filter(fn: (r) => {flux_any_of('r.node', nodes)})")
        if job is not None:
            lines.append(f"  |> filter(fn: (r) => r.job == {flux_string(job)})")
        if fields is not None:
            lines.append(f"  |> filter(fn: (r) => {flux_any_of('r._field', fields)})")
        lines.append('  |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")')
        return "\n".join(lines)

    def frames(
        self,
        measurement: str,
        start_ns: int,
        end_ns: int,
        *,
        nodes: Sequence[str] | None = None,
        job: str | None = None,
        fields: Sequence[str] | None = None,
    ) -> list[Frame]:
        with FluxReader(self.settings) as reader:
            query = self.query(measurement, start_ns, end_ns, nodes, job, fields)
            read = [_declared(frame) for frame in reader.frames(query)]
        kept = (_keep(f, start_ns, end_ns, nodes, job) for f in read if f is not None)
        return [frame for frame in kept if frame is not None]


def _declared(frame: Frame) -> Frame | None:
    """The frame with only the schema's tags and fields (the rest are Flux's own columns)."""
    spec = load_schema().measurement(frame.measurement)
    fields = {k: v for k, v in frame.fields.items() if k in spec.fields}
    if not fields:
        return None
    tags = {k: v for k, v in frame.tags.items() if k in spec.tags}
    return Frame(frame.measurement, frame.time_ns, tags, fields)
