"""Episodes: a timed change to one signal of some entities, and their sum over a block.

Background anomalies, quirks and faults all reduce to episodes, so telemetry needs one way to
apply them: :func:`block_state` turns the episodes that overlap a block of seconds into
(seconds x entities) arrays, one per effect, with a Python loop over episodes only.

>>> ep = Episode("gpu", np.array([1]), 2.0, 4.0, "clock", 0.5)
>>> state = block_state([ep], "gpu", 0, 5, entities=3)
>>> state.get("clock")[:, 1].tolist(), state.get("temp")
([1.0, 1.0, 0.5, 0.5, 1.0], 0.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LEVELS = ("gpu", "host", "port", "nic")

# How concurrent episodes of one effect combine, and the value when none is active.
MULTIPLY = {"clock", "power", "compute", "comm", "mem_available"}
# Factors on a nominal value that telemetry reports only where an episode touches them
# (:meth:`BlockState.touched`): the port's link rate, the NIC's negotiated speed, the GPU's
# enforced power limit and memory clock, the local disk's throughput.
MULTIPLY |= {"link_rate", "nic_speed", "power_limit", "mem_clock", "disk_throughput"}
BITWISE_OR = {"throttle"}
MINIMUM = {"pcie_gen", "pcie_width", "port_state"}
NEUTRAL_MINIMUM = 1 << 30  # "no limit" for the MINIMUM effects


@dataclass(frozen=True)
class Episode:
    """``effect`` changes by ``value`` on ``entities`` (global indices at ``level``) during
    [start_s, end_s), seconds since the simulation start. With ``ramp`` the value grows
    linearly from 0 to ``value`` over the episode: errors that build up before a failure."""

    level: str
    entities: np.ndarray
    start_s: float
    end_s: float
    effect: str
    value: float
    ramp: bool = False


def neutral(effect: str) -> float:
    if effect in MULTIPLY:
        return 1.0
    if effect in MINIMUM:
        return float(NEUTRAL_MINIMUM)
    return 0.0


class BlockState:
    """The combined effects on one level for seconds [first_s, first_s + seconds)."""

    def __init__(self, seconds: int, entities: int) -> None:
        self.shape = (seconds, entities)
        self.arrays: dict[str, np.ndarray] = {}

    def get(self, effect: str) -> np.ndarray | float:
        """The (seconds, entities) array of ``effect``, or its neutral scalar if untouched."""
        array = self.arrays.get(effect)
        return neutral(effect) if array is None else array

    def touched(self, effect: str) -> bool:
        """Whether any episode of ``effect`` overlaps the block."""
        return effect in self.arrays

    def array(self, effect: str) -> np.ndarray:
        """Like :meth:`get`, always as a full array."""
        return np.broadcast_to(np.asarray(self.get(effect), dtype=float), self.shape)

    def apply(self, episode: Episode, first_s: int) -> None:
        seconds = first_s + np.arange(self.shape[0])
        rows = (seconds >= episode.start_s) & (seconds < episode.end_s)
        if not rows.any():
            return
        effect = episode.effect
        target = self.arrays.get(effect)
        if target is None:
            target = self.arrays[effect] = np.full(self.shape, neutral(effect))
        value: np.ndarray | float = episode.value
        if episode.ramp:
            span = max(episode.end_s - episode.start_s, 1e-9)
            value = episode.value * np.clip((seconds[rows] - episode.start_s) / span, 0, 1)
            value = np.asarray(value)[:, None]
        block = np.ix_(np.flatnonzero(rows), episode.entities)
        if effect in MULTIPLY:
            target[block] *= value
        elif effect in BITWISE_OR:
            target[block] = np.bitwise_or(target[block].astype(np.int64), int(episode.value))
        elif effect in MINIMUM:
            target[block] = np.minimum(target[block], value)
        else:
            target[block] += value


class EpisodeIndex:
    """Episodes of one level with their times as arrays, to find a block's episodes fast."""

    def __init__(self, episodes: Sequence[Episode]) -> None:
        self.episodes = list(episodes)
        self.starts = np.array([e.start_s for e in self.episodes], dtype=float)
        self.ends = np.array([e.end_s for e in self.episodes], dtype=float)

    def overlapping(self, first_s: int, last_s: int) -> list[Episode]:
        hits = np.flatnonzero((self.starts < last_s) & (self.ends > first_s))
        return [self.episodes[i] for i in hits]


def block_state(
    episodes: Sequence[Episode] | EpisodeIndex,
    level: str,
    first_s: int,
    seconds: int,
    entities: int,
) -> BlockState:
    index = episodes if isinstance(episodes, EpisodeIndex) else EpisodeIndex(episodes)
    state = BlockState(seconds, entities)
    for episode in index.overlapping(first_s, first_s + seconds):
        if episode.level == level:
            state.apply(episode, first_s)
    return state
