"""What every telemetry family shares: one block's inputs, cumulative counters, tag columns.

A block is ``seconds`` consecutive 1 s samples of every entity; arrays are (seconds,
entities) and frames are laid out time-major, so a frame of a block is built by a handful of
numpy calls whatever the cluster size.

>>> counters = Counters()
>>> rng = np.random.default_rng(0)
>>> counters.add("x", np.ones((3, 2)), rng, poisson=False)[:, 0].tolist()
[1, 2, 3]
>>> counters.add("x", np.ones((1, 2)), rng, poisson=False)[:, 0].tolist()
[4]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator.effects import BlockState


@dataclass
class BlockInput:
    """Everything telemetry needs to know about seconds [first_s, first_s + seconds)."""

    first_s: int
    seconds: int
    times_ns: np.ndarray  # (seconds,) int64, the sample time of each second
    rng: np.random.Generator
    gpu: BlockState
    host: BlockState
    port: BlockState
    nic: BlockState
    util: np.ndarray  # (seconds, gpus) GPU busy ratio from the jobs
    traffic: np.ndarray  # (seconds, gpus) 0-1 share of nominal network traffic
    allocated: np.ndarray  # (seconds, gpus) bool: a job process holds the GPU
    checkpointing: np.ndarray  # (seconds, nodes) 0-1: the node writes a checkpoint
    # The nodes whose rows are written (a flow partition's shard), or None for all. Values
    # are still drawn for every entity, so a kept node's rows are those of a full run.
    kept: frozenset[str] | None = None


class Counters:
    """Monotonic counters per entity that carry over from block to block, as hardware does."""

    def __init__(self) -> None:
        self.values: dict[str, np.ndarray] = {}

    def add(
        self,
        name: str,
        per_second: np.ndarray | float,
        rng: np.random.Generator,
        shape: tuple[int, int] | None = None,
        poisson: bool = True,
        start: np.ndarray | None = None,
    ) -> np.ndarray:
        """Cumulative values after each second; increments are Poisson draws of the rate."""
        rate = np.broadcast_to(np.asarray(per_second, dtype=float), shape or np.shape(per_second))
        step = rng.poisson(rate) if poisson else np.round(rate).astype(np.int64)
        base = self.values.get(name)
        if base is None:
            base = np.zeros(rate.shape[1], np.int64) if start is None else start.astype(np.int64)
        out = base + np.cumsum(step, axis=0, dtype=np.int64)
        self.values[name] = out[-1].copy()
        return out


def tiled_tags(tags: dict[str, np.ndarray], seconds: int, rows: np.ndarray | None = None) -> dict:
    """Per-entity tag columns repeated for each second (time-major), optionally masked."""
    out = {name: np.tile(column, seconds) for name, column in tags.items()}
    return out if rows is None else {name: column[rows] for name, column in out.items()}


def frame(
    measurement: str,
    input: BlockInput,
    tags: dict[str, np.ndarray],
    fields: dict[str, np.ndarray],
    keep: np.ndarray | None = None,
) -> Frame:
    """A time-major frame from (seconds, entities) field arrays; ``keep`` masks rows out, and
    so do the nodes the block does not keep (before any row is laid out)."""
    if input.kept is not None:
        columns = kept_mask(tags["node"], input.kept)
        if not columns.all():
            tags = {name: column[columns] for name, column in tags.items()}
            fields = {name: np.asarray(values)[:, columns] for name, values in fields.items()}
            keep = None if keep is None else keep[:, columns]
    entities = len(next(iter(tags.values())))
    times = np.repeat(input.times_ns, entities)
    flat = {name: np.ascontiguousarray(values).reshape(-1) for name, values in fields.items()}
    tag_columns = tiled_tags(tags, input.seconds)
    if keep is not None:
        rows = keep.reshape(-1)
        if not rows.all():
            times = times[rows]
            flat = {name: column[rows] for name, column in flat.items()}
            tag_columns = {name: column[rows] for name, column in tag_columns.items()}
    return Frame(measurement, times, tag_columns, flat)


def kept_mask(nodes: np.ndarray, kept: frozenset[str]) -> np.ndarray:
    return np.fromiter((node in kept for node in nodes.tolist()), bool, len(nodes))


def kept_rows(frames: list[Frame], kept: frozenset[str] | None) -> list[Frame]:
    """``frames`` without the rows of nodes outside ``kept`` (None keeps every node)."""
    if kept is None:
        return frames
    out = []
    for f in frames:
        rows = kept_mask(f.tags["node"], kept)
        out.append(f if rows.all() else f.take(rows))
    return out


def noise(rng: np.random.Generator, shape: tuple[int, ...], sigma: float) -> np.ndarray:
    return rng.normal(0.0, sigma, shape)


def ratio(values: np.ndarray) -> np.ndarray:
    """Clipped to 0-1 and rounded as /proc and NVML report them (no false precision)."""
    return np.round(np.clip(values, 0.0, 1.0), 4)


def tag(values: list[str]) -> np.ndarray:
    return np.array(values, dtype=object)
