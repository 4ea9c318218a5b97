"""Telemetry read from several InfluxDB instances, each holding part of the fleet.

InfluxDB OSS does not cluster: a large fleet writes to several instances, each node agent to
the one of its rack group (``docs/flow-cluster.md``). :class:`InstancesSource` polls every
instance for each shard of nodes, as :class:`~flows.io.influx_source.InfluxSource` polls one,
and hands the shard step each window once every instance has given it: the instances' rows
together, in the order of the instances. A window closes by the same clock on every instance,
so each gives the same windows; an instance that is down holds the others' windows back (its
own reader backs off and catches up) rather than letting a window go out without its nodes.

``tests/test_influx_instances.py`` holds two real servers, each with half of a simulated fleet,
to the events of one server holding all of it.
"""

from __future__ import annotations

from datetime import datetime

from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

from reflex_localize.flows.io.influx_source import InfluxPartition, InfluxSource
from reflex_localize.flows.messages import WindowBatch


class InstancesSource(FixedPartitionedSource[WindowBatch, int]):
    """One partition per shard of nodes, each reading that shard from every instance."""

    def __init__(self, instances: list[InfluxSource]) -> None:
        if not instances or len({s.n_shards for s in instances}) != 1:
            raise ValueError("need one or more instances, all with the same number of shards")
        self.instances = instances

    def list_parts(self) -> list[str]:
        return self.instances[0].list_parts()

    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> InstancesPartition:
        parts = [s.build_part(step_id, for_part, resume_state) for s in self.instances]
        return InstancesPartition(parts, resume_state)


class InstancesPartition(StatefulSourcePartition[WindowBatch, int]):
    """A shard's windows from every instance, each emitted once all have given it."""

    def __init__(self, parts: list[InfluxPartition], resume: int | None) -> None:
        self._parts = parts
        self._held: list[list[WindowBatch]] = [[] for _ in parts]
        self._done = [False] * len(parts)
        self._cursor = resume if resume is not None else parts[0].snapshot()

    def next_batch(self) -> list[WindowBatch]:
        for index, part in enumerate(self._parts):
            if self._done[index]:
                continue
            try:
                self._held[index] += part.next_batch()
            except StopIteration:
                self._done[index] = True
        out = []
        while all(held or done for held, done in zip(self._held, self._done, strict=True)):
            heads = [held[0].window for held in self._held if held]
            if not heads:
                raise StopIteration  # every instance has ended, every window sent
            window = min(heads)
            batches = [held.pop(0) for held in self._held if held and held[0].window == window]
            out.append(together(batches))
            self._cursor = out[-1].end_ns
        return out

    def next_awake(self) -> datetime | None:
        """When the next instance to wake wants to (None: poll now)."""
        parts = zip(self._parts, self._done, strict=True)
        times = [part.next_awake() for part, done in parts if not done]
        if any(t is None for t in times) or not times:
            return None
        return min(t for t in times if t is not None)

    def snapshot(self) -> int:
        """The end of the last window sent: every instance resumes there."""
        return self._cursor

    def close(self) -> None:
        for part in self._parts:
            part.close()


def together(batches: list[WindowBatch]) -> WindowBatch:
    """One shard's window from each instance, as one batch (their rows in instance order)."""
    first = batches[0]
    if len(batches) == 1:
        return first
    frames = [frame for batch in batches for frame in batch.frames]
    errors = [error for batch in batches for error in batch.errors]
    return WindowBatch(first.shard, first.window, first.start_ns, first.end_ns, frames, errors,
                       n_shards=first.n_shards)  # fmt: skip
