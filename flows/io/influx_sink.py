"""The production sink: scores, baselines and events written back to InfluxDB's results bucket.

Every worker writes through its own :class:`influx.writer.Writer`, synchronously: a batch is
in InfluxDB, or fsync'd in the worker's spool, before ``write_batch`` returns, because Bytewax
does not call ``close()`` on an abrupt shutdown. A spool left by a killed worker is replayed by
the next writer started on the same directory.

Writes are idempotent, which is what recovery needs: after a restart Bytewax replays from the
last snapshot, and the flow produces the same points again. InfluxDB keeps one point per series
and timestamp, so a replayed score or baseline overwrites itself, and an event (keyed by job,
trigger and time, with its deterministic ``event_id``) is stored once.

>>> settings = InfluxSettings(url="http://127.0.0.1:8086", bucket="reflex", token="token")
>>> sinks = influx_sinks(settings, Path("/tmp/o"))
>>> type(sinks.events.sink).__name__, sinks.errors is not None
('InfluxSink', True)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bytewax.connectors.files import FileSink
from bytewax.outputs import DynamicSink, StatelessSinkPartition

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.io.sinks import FlowSinks, SinkSpec, error_json
from reflex_localize.influx.config import InfluxSettings
from reflex_localize.influx.writer import Writer
from reflex_localize.schemas.codec import Point

_log = logging.getLogger(__name__)


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
        settings: InfluxSettings,
        spool_dir: Path,
        *,
        flush_wait_s: float = 30.0,
        on_written: Callable[[list[Point]], None] | None = None,
    ) -> None:
        # flush_wait_s: how long a batch is retried before it waits in the spool instead.
        self.settings, self.spool_dir = settings, spool_dir
        self.flush_wait_s, self._on_written = flush_wait_s, on_written

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _WriterPartition:
        spool = self.spool_dir / f"{step_id}-worker-{worker_index}"
        writer = Writer.from_settings(self.settings, spool)
        return _WriterPartition(writer, self.flush_wait_s, self._on_written)


def influx_sinks(
    settings: InfluxSettings,
    out_dir: Path,
    on_written: Callable[[list[Point]], None] | None = None,
) -> FlowSinks:
    """Events and points to the settings' bucket (spooled in ``out_dir/spool`` while InfluxDB
    is away); rejected records to ``out_dir/errors.jsonl`` (the schema has no measurement for
    them, and they must stay visible)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "errors.jsonl").touch()
    sink = InfluxSink(settings, out_dir / "spool", on_written=on_written)
    return FlowSinks(
        SinkSpec(sink, event_points),
        SinkSpec(sink),
        SinkSpec(FileSink(out_dir / "errors.jsonl"), error_json),
    )
