"""How ``derive`` joins a window's frames: a later frame of a measurement overwrites an earlier
one's value of the same entity and signal and leaves the rest, a frame no signal reads adds no
entity, and a host takes its fullest filesystem (``host_fs``, which the simulator never
writes)."""

from __future__ import annotations

import numpy as np

from reflex_localize.flows.signals.derive import SIGNAL_INDEX, CounterMemory, derive
from reflex_localize.schemas.frame import Frame


def _frame(measurement: str, tags: dict[str, list[str]], fields: dict[str, list[float]]) -> Frame:
    rows = len(next(iter(fields.values())))
    return Frame(
        measurement,
        np.arange(rows, dtype=np.int64),
        {name: np.array(values, dtype=object) for name, values in tags.items()},
        {name: np.array(values) for name, values in fields.items()},
    )


def test_a_later_frame_overwrites_only_what_it_carries() -> None:
    early = _frame(
        "gpu", {"node": ["n0", "n1"], "gpu": ["0", "0"]}, {"temperature_celsius": [50.0, 60.0]}
    )
    late = _frame("gpu", {"node": ["n1"], "gpu": ["0"]}, {"temperature_celsius": [70.0]})
    unread = _frame("host", {"node": ["n9"]}, {"no_such_field": [1.0]})
    got = derive([early, unread, late], 10.0, CounterMemory())
    assert got.entities.tolist() == ["n0|gpu|0", "n1|gpu|0"]
    assert got.values[:, SIGNAL_INDEX["temperature_high"]].tolist() == [50.0, 70.0]
    assert np.isnan(got.values[:, SIGNAL_INDEX["sm_clock_low"]]).all()


def test_a_host_takes_its_fullest_filesystem() -> None:
    frame = _frame(
        "host_fs",
        {"node": ["n0", "n0", "n1"], "mountpoint": ["/", "/data", "/"]},
        {"used_ratio": [0.2, 0.9, 0.4]},
    )
    got = derive([frame], 10.0, CounterMemory())
    assert got.entities.tolist() == ["n0|host|-", "n1|host|-"]
    assert got.values[:, SIGNAL_INDEX["fs_full"]].tolist() == [0.9, 0.4]
