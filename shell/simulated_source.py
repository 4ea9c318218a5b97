"""The simulator as a flow source: the shell hands it to the flow, which never imports it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from reflex_localize.flows.io.sources import ChunkSource, split_windows
from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator import Simulation, load_scenario, scale_scenario


class SimulatorSource(ChunkSource):
    """The in-process simulator: one (deterministic) simulation per process, shared by its
    partitions, laying out only the rows of the nodes their shards own (see
    :class:`ChunkSource`).

    >>> source = SimulatorSource("demo", seed=7, n_shards=2)
    >>> source.list_parts()
    ['shard-0', 'shard-1']
    """

    def __init__(
        self,
        scenario: str,
        seed: int = 7,
        n_shards: int = 1,
        window_seconds: float = 10.0,
        scale: int | None = None,
    ) -> None:
        super().__init__(self._simulate, n_shards, window_seconds)
        self.scenario, self.seed, self.scale = scenario, seed, scale

    def _simulate(
        self, window_seconds: float, nodes: Callable[[str], bool] | None
    ) -> Iterable[list[Frame]]:
        scenario = load_scenario(self.scenario)
        if self.scale is not None:
            scenario = scale_scenario(scenario, self.scale)
        return Simulation(scenario, seed=self.seed).chunks(window_seconds, nodes)


def simulated_windows(
    sim: Simulation, window_seconds: float = 10.0
) -> Iterator[tuple[int, list[Frame]]]:
    """A simulation's frames cut into epoch-aligned windows."""
    window_ns = int(window_seconds * 1e9)
    for frames in sim.chunks(seconds=window_seconds):
        for window, window_frames, _ in split_windows(frames, window_ns):
            yield window, window_frames
