"""Sinks and shapes for the flow's outputs: files for replays, memory for the demo and eval."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bytewax.connectors.files import FileSink
from bytewax.outputs import DynamicSink, Sink, StatelessSinkPartition

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.messages import ErrorRecord
from reflex_localize.schemas.codec import Point, encode


def _same(item: Any) -> Any:
    return item


@dataclass
class SinkSpec:
    """A sink and how an output item is shaped for it (a file sink takes strings)."""

    sink: Sink
    shape: Callable[[Any], Any] = _same


@dataclass
class FlowSinks:
    """Where each output goes: events, points (scores and baselines) and errors."""

    events: SinkSpec
    points: SinkSpec | None = None
    errors: SinkSpec | None = None


def event_json(event: LocalizationEvent) -> str:
    return event.to_json()


def points_line_protocol(points: list[Point]) -> str:
    return "\n".join(encode(point) for point in points)


def error_json(error: ErrorRecord) -> str:
    return json.dumps(asdict(error), sort_keys=True)


class _CallbackPartition(StatelessSinkPartition[Any]):
    def __init__(self, callback: Callable[[str, Any], None]) -> None:
        self._callback = callback

    def write_batch(self, items: list[tuple[str, Any]]) -> None:
        for route, item in items:
            self._callback(route, item)


class CallbackSink(DynamicSink[Any]):
    """Calls ``callback(route, item)`` in-process: for the demo's live view and the eval."""

    def __init__(self, callback: Callable[[str, Any], None]) -> None:
        self._callback = callback

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _CallbackPartition:
        return _CallbackPartition(self._callback)


def callback_sinks(callback: Callable[[str, Any], None], *, points: bool = True) -> FlowSinks:
    sink = CallbackSink(callback)
    return FlowSinks(SinkSpec(sink), SinkSpec(sink) if points else None, SinkSpec(sink))


def file_sinks(directory: Path, *, points: bool = True) -> FlowSinks:
    """events.jsonl, outputs.lp and errors.jsonl in ``directory``. Bytewax's FileSink is one
    file written by one worker and truncated to its snapshot on resume, so a replay after a
    crash never duplicates a line."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("events.jsonl", "outputs.lp", "errors.jsonl"):
        (directory / name).touch()
    return FlowSinks(
        SinkSpec(FileSink(directory / "events.jsonl"), event_json),
        SinkSpec(FileSink(directory / "outputs.lp"), points_line_protocol) if points else None,
        SinkSpec(FileSink(directory / "errors.jsonl"), error_json),
    )


def read_events(path: Path) -> list[LocalizationEvent]:
    return [LocalizationEvent.from_json(line) for line in path.read_text().splitlines() if line]
