"""A simulation asked for some nodes (a flow process's shards) lays out only their rows, and
each is the row a full run gives: values are still drawn for every entity."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator import Simulation, load_scenario

CHUNKS = 7  # 70 s: the first chunk's one-off rows (GPU info), the minute's membership rows


def grouped(chunk: list[Frame]) -> dict[tuple, list[Frame]]:
    out: dict[tuple, list[Frame]] = {}
    for frame in chunk:
        out.setdefault((frame.measurement, tuple(sorted(frame.fields))), []).append(frame)
    return out


def rows(frames: list[Frame], keep: np.ndarray | None = None) -> dict[str, list]:
    columns = {"time": np.concatenate([f.time_ns for f in frames])}
    for name in frames[0].tags:
        columns[name] = np.concatenate([f.tags[name] for f in frames])
    for name in frames[0].fields:
        columns[name] = np.concatenate([np.asarray(f.fields[name]) for f in frames])
    return {name: (c if keep is None else c[keep]).tolist() for name, c in columns.items()}


@pytest.mark.parametrize("scenario", ["demo", "fault_xid79"])
def test_some_nodes_get_the_rows_of_a_full_run(scenario: str) -> None:
    loaded = load_scenario(scenario)
    names = [n.name for n in Simulation(loaded, seed=3).cluster.nodes]
    kept = set(names[::3])
    full = itertools.islice(Simulation(loaded, seed=3).chunks(10.0), CHUNKS)
    some = itertools.islice(Simulation(loaded, seed=3).chunks(10.0, kept.__contains__), CHUNKS)
    compared = 0
    for whole, part in zip(full, some, strict=True):
        ours = grouped(part)
        for key, frames in grouped(whole).items():
            keep = np.isin(np.concatenate([f.tags["node"] for f in frames]), list(kept))
            if not keep.any():
                assert key not in ours
                continue
            assert rows(ours[key]) == rows(frames, keep), key
            compared += 1
        assert {n for f in part for n in f.tags["node"].tolist()} <= kept
    assert compared > 20
