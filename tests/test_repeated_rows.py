"""The replay's duplicate check (flows/io/sources.py ``_repeats_a_row``) says what a set of row
tuples says: whether two rows of a frame share every tag and the stamp."""

from __future__ import annotations

import random

import numpy as np
import pytest

from reflex_localize.flows.io.sources import _repeats_a_row
from reflex_localize.schemas.frame import Frame
from reflex_localize.schemas.line_decoder import decode_block
from reflex_localize.schemas.line_decoder_compiled import compiled_available


@pytest.mark.parametrize("seed", range(60))
def test_repeats_a_row_matches_a_set_of_row_tuples(seed: int) -> None:
    rng = random.Random(seed)
    rows = rng.randint(0, 40)
    names = rng.sample(["node", "gpu", "cluster", "hca"], rng.randint(0, 3))
    tags = {n: np.array([rng.choice("ab") for _ in range(rows)], dtype=object) for n in names}
    times = np.array([rng.choice([5, 6, 7, 10**18]) for _ in range(rows)], np.int64)
    frame = Frame("gpu", times, tags, {})
    tuples = list(zip(times.tolist(), *(c.tolist() for c in tags.values()), strict=True))
    assert _repeats_a_row(frame) == (len(set(tuples)) < len(tuples))


@pytest.mark.parametrize("seed", range(30))
def test_the_decoder_says_a_frame_repeats_no_row_only_where_none_does(seed: int) -> None:
    """The compiled decoder looks for repeats as it reads a kind; where it says a frame has
    none (so the replay skips its own look), the replay's check agrees."""
    assert compiled_available()
    rng = random.Random(seed)
    lines = [
        f"host,cluster={rng.choice('ab')},node=n{rng.randint(0, 3)} load1=1 {rng.choice([5, 6])}"
        for _ in range(rng.randint(4, 30))
    ]
    block = decode_block(lines, carry_tags=True)
    for frame, unrepeated in zip(block.frames, block.unrepeated, strict=True):
        assert not (unrepeated and _repeats_a_row(frame))
    if len(set(lines)) == len(lines):
        assert all(block.unrepeated)
    else:
        assert not any(block.unrepeated)
