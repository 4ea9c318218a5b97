"""The block decoder (schemas/line_decoder.py) against the strict one: on every line the same
verdict, the same reject with the same reason, and frames equal row for row to those
``frames_from_points`` makes of the strict decoder's points."""

from __future__ import annotations

import random

import numpy as np
import pytest
from fuzz_support import fuzz_input

from reflex_localize.schemas.codec import decode, encode
from reflex_localize.schemas.frame import Frame, frames_from_points
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.schemas.line_decoder import decode_block
from reflex_localize.shell.sample_points import sample_points
from reflex_localize.simulator import Simulation, load_scenario

VALID_LINES = [encode(point) for point in sample_points(per_measurement=2)]


def demo_lines(seconds: int) -> list[str]:
    lines: list[str] = []
    for number, chunk in enumerate(Simulation(load_scenario("demo"), seed=7).chunks(10.0)):
        if number * 10 >= seconds:
            break
        lines += [line for frame in chunk for line in encode_frame(frame)]
    return lines


def assert_same_frames(ours: list[Frame], theirs: list[Frame]) -> None:
    assert [(f.measurement, list(f.tags), list(f.fields)) for f in ours] == [
        (f.measurement, list(f.tags), list(f.fields)) for f in theirs
    ]
    for a, b in zip(ours, theirs, strict=True):
        assert np.array_equal(a.time_ns, b.time_ns)
        for name in a.tags:
            assert a.tags[name].dtype == object and a.tags[name].tolist() == b.tags[name].tolist()
        for name in a.fields:
            assert a.fields[name].dtype == b.fields[name].dtype, name
            assert a.fields[name].tolist() == b.fields[name].tolist(), name


def assert_agrees_with_strict(lines: list[str], carry_tags: bool) -> None:
    block = decode_block(lines, carry_tags=carry_tags)
    points, rejects = [], []
    for position, line in enumerate(lines):
        try:
            points.append(decode(line, carry_tags=carry_tags))
        except Exception as error:
            rejects.append((position, type(error), str(error), getattr(error, "code", "")))
    assert [(p, type(e), str(e), getattr(e, "code", "")) for p, e in block.rejects] == rejects
    assert_same_frames(block.frames, frames_from_points(points))
    rows = sorted(p for positions in block.positions for p in positions.tolist())
    assert rows == sorted(set(range(len(lines))) - {p for p, *_ in rejects})


def test_the_demo_capture_decodes_as_the_strict_decoder_decodes_it() -> None:
    lines = demo_lines(30)
    assert_agrees_with_strict(lines, carry_tags=True)
    assert not decode_block(lines, carry_tags=True).rejects


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("carry_tags", [True, False])
def test_mutated_lines_get_the_strict_verdict(seed: int, carry_tags: bool) -> None:
    """Valid lines (of every measurement) mixed with fuzzed ones: rejects and frames agree."""
    rng = random.Random(seed)
    seeds = VALID_LINES + demo_lines(10)[::97]
    lines = [rng.choice(seeds) if rng.random() < 0.5 else fuzz_input(rng, seeds)
             for _ in range(2_000)]  # fmt: skip
    assert_agrees_with_strict(lines, carry_tags)


def test_values_the_fast_path_must_leave_to_the_strict_decoder() -> None:
    head = "host,cluster=c,node=n1"
    odd = ["5i", "1_0", "nan", "inf", "-0", "1e400", "t", "", "1.5u", "0x10", "+2", " ", "1e5"]
    lines = [f"{head} load1={v},procs_running=3i 5" for v in odd]
    lines += [f"{head} load1=1,procs_running={v} 5" for v in ("3u", "-3i", "9" * 19 + "i", "3")]
    lines += [f"{head} load1=1 {t}" for t in ("+5", "1_0", "-1", "9" * 19, "")]
    lines += [f"{head},node=n2 load1=1 5", f"{head},rack= load1=1 5", f"{head} load1=1,load1=2 5"]
    lines += ["host,cluster=c load1=1 5", f"{head} nope=1 5", f"{head},node=a=b load1=1 5"]
    for carry_tags in (True, False):
        assert_agrees_with_strict(lines + VALID_LINES, carry_tags)
