"""A large job in a fleet whose GPUs throttle for a few seconds, in turn, every few minutes:
each throttle slows the synchronous job while it lasts, and the slowdowns add up to a
regression now and then. The GPU throttling at that moment did not cause a slowdown that built
over several windows, and is over before anyone could act: nothing is told. Before the
persistence rule (``JobState._held``) both seeds raised a warning naming such a GPU (the 12 of
the quirky soak's 13 false events were of this kind)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

SCENARIO = str(Path(__file__).parent / "scenarios" / "rolling_throttles.toml")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [7, 8])
def test_throttles_of_a_few_seconds_in_turn_name_no_gpu(seed: int) -> None:
    events = run_in_process(SimulatorSource(SCENARIO, seed, 1, 10.0)).events
    assert not events, [e.summary for e in events]
