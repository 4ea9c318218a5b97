"""A whole run as one frame per measurement, for tests, notebooks and offline checks.

Frames of one measurement may carry different field sets (remapped rows or retired pages,
InfiniBand or RoCE counters, per-kind event fields); the merged frame keeps the fields all of
them share, plus any field asked for in ``keep`` from the frames that have it.

>>> from reflex_localize.simulator import Simulation, load_scenario
>>> tables = run_tables(Simulation(load_scenario("benign_quiet"), seed=1), seconds=60)
>>> "gpu_nvlink" in tables, len(tables["host"]) == 12 * 720
(True, True)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator.simulation import Simulation


def concat_frames(frames: Iterable[Frame]) -> Frame:
    """One frame of the rows of ``frames`` (one measurement), with their common fields."""
    frames = list(frames)
    common = set.intersection(*(set(f.fields) for f in frames))
    names = [name for name in frames[0].fields if name in common]
    return Frame(
        frames[0].measurement,
        np.concatenate([f.time_ns for f in frames]),
        {k: np.concatenate([f.tags[k] for f in frames]) for k in frames[0].tags},
        {k: np.concatenate([f.fields[k] for f in frames]) for k in names},
    )


def run_tables(sim: Simulation, seconds: float = 10.0) -> dict[str, Frame]:
    """Runs ``sim`` to the end; one merged frame per measurement (common fields only)."""
    by_measurement: dict[str, list[Frame]] = defaultdict(list)
    for chunk in sim.chunks(seconds=seconds):
        for frame in chunk:
            by_measurement[frame.measurement].append(frame)
    return {name: concat_frames(frames) for name, frames in by_measurement.items()}
