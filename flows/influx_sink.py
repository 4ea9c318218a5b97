"""The production sink: scores, baselines and events written back to InfluxDB's results bucket.

Every worker writes through its own :class:`influx.writer.Writer`, synchronously: a batch is
in InfluxDB, or fsync'd in the worker's spool, before ``write_batch`` returns, because Bytewax
does not call ``close()`` on an abrupt shutdown. A spool left by a killed worker is replayed by
the next writer started on the same directory.

Writes are idempotent, which is what recovery needs: after a restart Bytewax replays from the
last snapshot, and the flow produces the same points again. InfluxDB keeps one point per series
and timestamp, so a replayed score or baseline overwrites itself, and an event (keyed by job,
trigger and time, with its deterministic ``event_id``) is stored once.

>>> sinks = influx_sinks(InfluxSinkSettings("http://127.0.0.1:8086", "token"), Path("/tmp/o"))
>>> type(sinks.events.sink).__name__, sinks.errors is not None
('InfluxSink', True)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bytewax.connectors.files import FileSink
from bytewax.outputs import DynamicSink, StatelessSinkPartition

from reflex_localize.flows.events import LocalizationEvent
from reflex_localize.flows.sinks import FlowSinks, SinkSpec, error_json
from reflex_localize.influx.writer import Writer
from reflex_localize.schemas.codec import Point

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InfluxSinkSettings:
    """Where results go. The token comes from :mod:`influx.config`, never a file in the repo."""

    url: str
    token: str = field(repr=False)
    org: str = "reflex"
    bucket: str = "reflex"
    spool_dir: Path = Path("reflex-spool")
    timeout_s: float = 10.0
    flush_wait_s: float = 30.0  # how long write_batch retries before spooling to disk
    verify_ssl: bool = True
    ssl_ca_cert: str | None = None


def event_points(event: LocalizationEvent) -> list[Point]:
    return [event.to_point()]


class _WriterPartition(StatelessSinkPartition[Any]):
    def __init__(
        self, writer: Writer, wait_s: float, on_written: Callable[[list[Point]], None] | None
    ) -> None:
        self._writer, self._wait_s, self._on_written = writer, wait_s, on_written

    def write_batch(self, items: list[tuple[str, list[Point]]]) -> None:
        points = [point for _, batch in items for point in batch]
        if not points:
            return
        self._writer.write(points)
        if not self._writer.flush(self._wait_s):
            _log.warning("InfluxDB unreachable: %d points stay spooled for later", len(points))
        if self._on_written is not None:
            self._on_written(points)

    def close(self) -> None:
        self._writer.close(self._wait_s)


class InfluxSink(DynamicSink[Any]):
    """Writes ``(route, list[Point])`` items; one writer and spool directory per worker.

    ``on_written`` is called with each batch once it is settled (the lag benchmark uses it).
    """

    def __init__(
        self,
        settings: InfluxSinkSettings,
        on_written: Callable[[list[Point]], None] | None = None,
    ) -> None:
        self.settings, self._on_written = settings, on_written

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _WriterPartition:
        s = self.settings
        writer = Writer(
            s.url,
            s.token,
            s.org,
            s.bucket,
            s.spool_dir / f"{step_id}-worker-{worker_index}",
            timeout_s=s.timeout_s,
            verify_ssl=s.verify_ssl,
            ssl_ca_cert=s.ssl_ca_cert,
        )
        return _WriterPartition(writer, s.flush_wait_s, self._on_written)


def influx_sinks(
    settings: InfluxSinkSettings,
    errors_dir: Path,
    on_written: Callable[[list[Point]], None] | None = None,
) -> FlowSinks:
    """Events and points to InfluxDB; rejected records to ``errors_dir/errors.jsonl`` (the
    schema has no measurement for them, and they must stay visible)."""
    errors_dir.mkdir(parents=True, exist_ok=True)
    (errors_dir / "errors.jsonl").touch()
    sink = InfluxSink(settings, on_written)
    return FlowSinks(
        SinkSpec(sink, event_points),
        SinkSpec(sink),
        SinkSpec(FileSink(errors_dir / "errors.jsonl"), error_json),
    )
