"""The fault_xid79 scenario (seed 7) as line protocol, 10 s at a time: the capture that the
replay, recovery and operator tests feed `reflex flow --source file:...`."""

from __future__ import annotations

from collections.abc import Iterator

from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.simulator import Simulation, load_scenario


def xid79_chunks(seconds: int) -> Iterator[list[str]]:
    """The lines of each 10 s of the scenario's first ``seconds`` (its XID 79 hits at 300 s)."""
    sim = Simulation(load_scenario("fault_xid79"), seed=7)
    for number, chunk in enumerate(sim.chunks(10.0)):
        if number * 10 >= seconds:
            return
        yield [line for frame in chunk for line in encode_frame(frame)]
