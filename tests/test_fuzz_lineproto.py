"""Fuzzing the line-protocol decoder: 10,000+ malformed lines, zero crashes, every rejection
counted with a reason.

``decode`` may only raise :class:`PointError`; ``decode_lines`` never raises and counts every
non-blank line as accepted or rejected; anything accepted re-encodes to a line that decodes to
the same point (no silent corruption).
"""

from __future__ import annotations

import random

from fuzz_support import FUZZ, SEEDS, Tally, fuzz_input
from hypothesis import given

from reflex_localize.schemas.codec import DecodeReport, PointError, decode, decode_lines, encode
from reflex_localize.shell.sample_points import sample_points

VALID_LINES = [encode(point) for point in sample_points(per_measurement=2)]
_single = Tally("line protocol decode")
_batched = Tally("line protocol decode_lines")


@FUZZ
@given(SEEDS)
def test_decode_raises_only_point_error(seed: int) -> None:
    line = fuzz_input(random.Random(seed), VALID_LINES)
    _single.inputs += 1
    try:
        point = decode(line)
    except PointError as error:
        _single.reject(error.reason)
        return
    _single.accepted += 1
    assert decode(encode(point)) == point


def test_decode_tally() -> None:
    _single.check()


def test_decode_lines_counts_every_line() -> None:
    """10,000 mutated lines as one file: each is accepted or rejected and counted."""
    rng = random.Random(9)
    text = "\n".join(fuzz_input(rng, VALID_LINES) for _ in range(12_000))
    physical = text.split("\n")
    considered = [line for line in physical if line.strip() and not line.startswith("#")]
    report = DecodeReport()
    points = list(decode_lines(physical, report))
    assert report.accepted == len(points)
    assert report.accepted + report.rejected_total == len(considered) >= 10_000
    assert all(reason.strip() for reason in report.rejected)
    assert len(report.examples) == 20
    _batched.inputs, _batched.accepted = len(considered), report.accepted
    _batched.rejected.update(report.rejected)
    _batched.check()
