"""Fuzzing the foreign translator: 10,000+ mutated Telegraf and dcgm-exporter lines (the golden
ones, mutated byte by byte), zero crashes. Each line is translated (its points obey the schema),
or refused with a :class:`PointError` carrying a reason; what the translator itself refuses or
ignores comes back as notes with a code."""

from __future__ import annotations

import random
from pathlib import Path

from fuzz_support import FUZZ, SEEDS, Tally, fuzz_input
from hypothesis import given

from reflex_localize.schemas.codec import PointError, validate
from reflex_localize.schemas.foreign_translate import ForeignTranslator

GOLDEN = Path(__file__).parent / "golden"
SEED_LINES = [
    row
    for name in ("telegraf_nvidia_smi", "telegraf_infiniband", "dcgm_v1", "dcgm_v2")
    for row in (GOLDEN / f"{name}.lp").read_text().splitlines()
    if row.strip() and not row.startswith("#")
]
_tally = Tally("foreign translate")
_translator = ForeignTranslator()  # one stream: its XID and counter memory is fuzzed too


@FUZZ
@given(SEEDS)
def test_translate_raises_only_point_error(seed: int) -> None:
    line = fuzz_input(random.Random(seed), SEED_LINES)
    _tally.inputs += 1
    try:
        points, notes = _translator.decode(line)
    except PointError as error:
        _tally.reject(error.reason)
        return
    for note in notes:
        assert note.code and note.where in ("translate", "carried")
        if note.where == "translate":
            _tally.reject(note.code)
    _tally.accepted += len(points)
    for point in points:
        assert validate(point, carry_tags=True) == point


def test_translate_tally() -> None:
    _tally.check()
