"""Recovery state pickled before the flow's modules moved into rooms still restores."""

from __future__ import annotations

import pickle

import numpy as np

from reflex_localize.flows.judge.detectors import LongitudinalBaseline
from reflex_localize.flows.signals.derive import CounterMemory


def written_by_older_reflex(state: object, old: bytes, new: bytes) -> bytes:
    """The state's pickle as it names its class's module before the move (protocol 0 names
    modules as plain lines, so the old path can be put back)."""
    data = pickle.dumps(state, protocol=0)
    assert new in data
    return data.replace(new, old)


def test_a_class_of_a_moved_module_restores_from_its_old_path() -> None:
    baseline = LongitudinalBaseline(n_signals=2, floors=np.ones(2))
    data = written_by_older_reflex(
        baseline, b"reflex_localize.flows.detectors\n", b"reflex_localize.flows.judge.detectors\n"
    )
    restored = pickle.loads(data)
    assert type(restored) is LongitudinalBaseline
    assert vars(restored).keys() == vars(baseline).keys()


def test_a_class_of_the_old_signals_module_restores_from_the_room_of_that_name() -> None:
    data = written_by_older_reflex(
        CounterMemory(),
        b"reflex_localize.flows.signals\n",
        b"reflex_localize.flows.signals.derive\n",
    )
    assert type(pickle.loads(data)) is CounterMemory
