"""Discrete events (XIDs, link changes, NCCL timeouts, process exits) and their frames.

Events are few next to gauges, so they are kept as records and grouped into frames, one per
field set, only when a block contains them.

>>> e = EventRecord(5_000_000_000, "node-0001", "nvml", "xid", {"code": 79, "gpu": 3})
>>> [f.measurement for f in event_frames([e], "sim", 0, 10_000_000_000)]
['event']
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from reflex_localize.schemas.frame import Frame

_INT_FIELDS = {"code", "gpu", "rank"}


@dataclass(frozen=True, order=True)
class EventRecord:
    time_ns: int
    node: str
    source: str  # "nvml", "kmsg" or "training"
    kind: str
    fields: dict[str, int | str] = field(compare=False, default_factory=dict)


def event_frames(
    events: Sequence[EventRecord], cluster: str, first_ns: int, end_ns: int
) -> list[Frame]:
    """Frames of the events in [first_ns, end_ns), one frame per field set."""
    groups: dict[tuple[str, ...], list[EventRecord]] = defaultdict(list)
    for event in events:
        if first_ns <= event.time_ns < end_ns:
            groups[tuple(sorted(event.fields))].append(event)
    frames = []
    for names, members in sorted(groups.items()):
        members.sort()
        fields = {
            name: np.array(
                [e.fields[name] for e in members],
                dtype=np.int64 if name in _INT_FIELDS else object,
            )
            for name in names
        }
        tags = {
            "cluster": np.full(len(members), cluster, dtype=object),
            "node": np.array([e.node for e in members], dtype=object),
            "source": np.array([e.source for e in members], dtype=object),
            "kind": np.array([e.kind for e in members], dtype=object),
        }
        times = np.array([e.time_ns for e in members], dtype=np.int64)
        frames.append(Frame("event", times, tags, fields))
    return frames


class EventLog:
    """All scheduled events, sorted once, sliced per block by binary search."""

    def __init__(self, events: Sequence[EventRecord]) -> None:
        self.events = sorted(events)
        self.times = np.array([e.time_ns for e in self.events], dtype=np.int64)

    def between(self, first_ns: int, end_ns: int) -> list[EventRecord]:
        lo, hi = np.searchsorted(self.times, [first_ns, end_ns])
        return self.events[lo:hi]
