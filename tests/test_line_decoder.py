"""The block decoder (schemas/line_decoder.py) against the strict one: on every line the same
verdict, the same reject with the same reason, and frames equal row for row to those
``frames_from_points`` makes of the strict decoder's points."""

from __future__ import annotations

import pickle
import random
from collections import Counter

import numpy as np
import pytest
from fuzz_support import fuzz_input

import reflex_localize.schemas.line_decoder as line_decoder
from reflex_localize.flows.signals.derive import factorize
from reflex_localize.schemas.codec import Point, decode, encode
from reflex_localize.schemas.contract import Schema
from reflex_localize.schemas.frame import Frame, frames_from_points
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.schemas.line_decoder import decode_block
from reflex_localize.schemas.line_decoder_compiled import compiled_available
from reflex_localize.schemas.line_decoder_tokens import SMALLEST_KIND
from reflex_localize.schemas.line_file import line_stamp
from reflex_localize.shell.sample_points import sample_points
from reflex_localize.simulator import Simulation, load_scenario

VALID_LINES = [encode(point) for point in sample_points(per_measurement=2)]


@pytest.fixture(autouse=True, params=["compiled", "numpy"])
def decoder_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs through both fast paths: the compiled one (which the project's
    install builds, so it must be there) and numpy's (where no compiler was found)."""
    if request.param == "numpy":
        monkeypatch.setenv("REFLEX_LINE_DECODER", "numpy")
    else:
        monkeypatch.delenv("REFLEX_LINE_DECODER", raising=False)
        assert compiled_available(), "schemas/plain_lines.c is not built: infra/setup_venv.sh"
    return str(request.param)


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


def assert_tag_codes_factorize(frames: list[Frame]) -> None:
    """Where the decoder gave a frame its tags as codes, they code the columns: each value
    once, the column the values at the codes; here, straight from the decoder, no value
    without a row, in first-seen order (what factorizing the column gives); and a frame
    pickled as codes loads with the same tags."""
    for frame in frames:
        for name, (distinct, codes) in (frame.tag_codes or {}).items():
            expected_distinct, expected_codes = factorize(frame.tags[name])
            assert distinct.tolist() == expected_distinct.tolist(), name
            assert codes.tolist() == expected_codes.tolist(), name
            assert distinct[codes].tolist() == frame.tags[name].tolist()
        loaded = pickle.loads(pickle.dumps(frame))
        assert list(loaded.tags) == list(frame.tags)
        for name, column in frame.tags.items():
            assert loaded.tags[name].dtype == object
            assert loaded.tags[name].tolist() == column.tolist()


def assert_agrees_with_strict(lines: list[str], carry_tags: bool) -> None:
    """Both ways: reading the time tokens, and taking the stamps a replay read (line_stamp)."""
    points, rejects = [], []
    for position, line in enumerate(lines):
        try:
            points.append(decode(line, carry_tags=carry_tags))
        except Exception as error:
            rejects.append((position, type(error), str(error), getattr(error, "code", "")))
    read = [line_stamp(line) for line in lines]
    for stamps in (None, np.array([-1 if s is None else s for s in read], np.int64)):
        block = decode_block(lines, carry_tags=carry_tags, stamps=stamps)
        assert [(p, type(e), str(e), getattr(e, "code", "")) for p, e in block.rejects] == rejects
        assert_same_frames(block.frames, frames_from_points(points))
        assert_tag_codes_factorize(block.frames)
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


def test_quoted_strings_are_cut_as_the_strict_decoder_cuts_them() -> None:
    """Separators inside quotes, quotes in the head, unpaired or escaped quotes, strings where
    numbers belong and numbers where strings belong: each line gets the strict verdict."""
    member = "job_membership,cluster=c,job=j,node=n1,rank=0"
    info = "gpu_info,cluster=c,gpu=0,node=n1,profile=p"
    strings = ['"h100 sxm, 80GB=x"', '""', '"a"b"', '"x" "y"', "h100", '"', '"open']
    lines = [f"{member} gpu=0i,world_size=8i,profile={s},active=true 5" for s in strings]
    lines += [f'{info} uuid="GPU-1",serial="1 2",pci_bus_id="0:1",name={s},driver_version="5" 5'
              for s in strings]  # fmt: skip
    lines += [
        f'{member} gpu="0",world_size=8i,profile="p",active=true 5',
        f'{member} gpu=0i,world_size=8i,profile="p\\"q",active=true 5',
        f'{member},x="q" gpu=0i,world_size=8i,profile="p",active=true 5',
        'job"membership,cluster=c gpu=0i 5',
        f'{member} gpu=0i,profile="p" "5"',
        f'{member} gpu=0i,profile="p q" 5 6',
        f'{member} gpu=0i,profile="p=q,r s"',
    ]
    for carry_tags in (True, False):
        assert_agrees_with_strict(lines + demo_lines(10)[::50], carry_tags)


def test_lines_of_one_width_are_told_apart_by_every_byte_of_their_names() -> None:
    """Kinds are found by separators and names; a name differing in one byte, a different
    measurement, or tags and fields traded across the space, is a kind of its own."""
    head = "host,cluster=c,node=n"
    lines = [f"{head}1 load1=1,load5=2 5", f"{head}2 load1=1,load6=2 5",
             f"{head}3 load5=1,load1=2 5", "hosu,cluster=c,node=n4 load1=1,load5=2 5",
             f"{head}5,load1=1 load5=2 5", "host,cluster=c,nodf=n6 load1=1,load5=2 5",
             f"{head}7 load1=1,load5=2 5", f"{head}8 load1=1,load15=2 5",
             f"{head}9 load1=1,load5=2,load15=3 5", f"{head}1 =1 5",
             f"{head}1 load1=1\x00,load5=2 5", f"{head}\u00e9 load1=1 5", f"{head}1 load1=1 5\x00",
             "", " ", "host", "host 5", "host,cluster=c"]  # fmt: skip
    for carry_tags in (True, False):
        assert_agrees_with_strict(lines * 3, carry_tags)


def test_a_line_holding_a_line_break_is_left_to_the_strict_decoder() -> None:
    lines = [*VALID_LINES[:5], VALID_LINES[0] + "\n" + VALID_LINES[1], *VALID_LINES[5:10]]
    assert_agrees_with_strict(lines, carry_tags=True)


def test_lines_at_the_length_limit_in_characters_but_past_it_in_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The block looks for long lines by their bytes; a line within the limit in characters
    (which the strict decoder counts) gets its verdict all the same, and so do the others of
    its block. (A low limit for the block alone: a line past it is the strict decoder's.)"""
    monkeypatch.setattr(line_decoder, "MAX_LINE_CHARS", 64)
    head = "host,cluster=c,node=n1 load1=0.5 1700000000000000000"
    wide = head.replace("n1", "n" + "\u00e9" * (64 - len(head) + 1))
    assert len(wide) == 64 < len(wide.encode())
    assert_agrees_with_strict([*VALID_LINES[:5], wide, wide + "0", *VALID_LINES[5:10]], True)


def test_a_real_capture_never_needs_the_strict_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Quoted strings too (job membership, GPU info) are read by the fast path: the replay's
    speed depends on it. Only a measurement with too few lines to be worth a kind (an event)
    may be left to the strict decoder."""
    lines = demo_lines(30)
    lines.insert(100, 'event,cluster=sim,kind=mce,node=n1,source=kmsg code=14i,message="m" 1')
    per_measurement = Counter(line.partition(",")[0] for line in lines)
    strict = line_decoder.decode

    def only_rare(line: str, schema: Schema | None = None, *, carry_tags: bool = False) -> Point:
        assert per_measurement[line.partition(",")[0]] < SMALLEST_KIND, line
        return strict(line, schema, carry_tags=carry_tags)

    monkeypatch.setattr(line_decoder, "decode", only_rare)
    assert any('"' in line for line in lines) and per_measurement["event"] == 1
    block = decode_block(lines, carry_tags=True)
    assert sum(len(p) for p in block.positions) == len(lines) and not block.rejects


def test_many_lines_that_are_not_plain_and_many_kinds_of_one_width() -> None:
    """Past a few thousand bytes that make lines not plain, or past the kinds one width may
    have, the block decoder takes other paths: the verdicts stay the strict decoder's."""
    head = "host,cluster=c,node=n"
    lines = [f"{head}{i % 7} load1={i}.5 5" for i in range(6_000)]
    lines[::2] = [f"{head}\u00e9{i} load1=1 5" for i in range(3_000)]  # 6,000 bytes not plain
    lines[1::6] = [f'{head}{i} load1="x{i}" 5' for i in range(1_000)]  # and quotes
    lines += [f"{head}1,x{i}=v load1=1 5" for i in range(40)]  # 40 kinds of one width
    assert_agrees_with_strict(lines, carry_tags=True)
    assert_agrees_with_strict(lines[:200] + lines[-40:], carry_tags=False)


def test_a_block_read_in_pieces_is_decoded_as_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Frames and rejects do not depend on where the pieces of a large block end."""
    rng = random.Random(11)
    seeds = VALID_LINES + demo_lines(10)[::97]
    lines = [rng.choice(seeds) if rng.random() < 0.7 else fuzz_input(rng, seeds)
             for _ in range(600)]  # fmt: skip
    for piece_lines in (7, 64, 599):
        monkeypatch.setattr(line_decoder, "_PIECE_LINES", piece_lines)
        assert_agrees_with_strict(lines, carry_tags=True)


def test_a_stamp_past_influxdbs_range_is_left_to_the_strict_decoder() -> None:
    """2**63 - 1 reads as a plain stamp (line_stamp) but InfluxDB refuses it: the strict
    decoder says why, whether the times are read here or taken from the caller."""
    lines = [f"host,cluster=c,node=n{i} load1=0.5 {2**63 - 1 - (i % 2)}" for i in range(8)]
    assert_agrees_with_strict(lines, carry_tags=True)
    assert len(decode_block(lines, stamps=np.array([line_stamp(x) for x in lines])).rejects) == 4


@pytest.mark.parametrize("carry_tags", [True, False])
def test_spellings_at_the_edges_of_what_the_fast_paths_vouch_for(carry_tags: bool) -> None:
    """Each spelling in a kind of its own lines (four, so that a kind is read): digits at and
    past the counts a path vouches for, signs, points, suffixes, stamps at InfluxDB's limit,
    tags at and past their length, empty keys and values, odd separators."""
    floats = ["0", "-0", ".5", "5.", "-.5", "1.", "12345678901234", "1234567890.1234",
              "123456789012345", "0.000000000000001", "1.2.3", "--1", "-", ".", "1e5", "+5",
              "1_0", "nan", "inf", "5i", "12.50", "007"]  # fmt: skip
    ints = [
        "0i",
        "-0i",
        "123456789012345678i",
        "-123456789012345678i",
        "1234567890123456789i",
        "9223372036854775807i",
        "-9223372036854775808i",
        "5",
        "5u",
        "i",
        "-i",
        "1.5i",
    ]
    bools = ["true", "false", "t", "T", "True", "FALSE", "yes", "truex"]
    stamps = ["0", "1", str(2**63 - 2), str(2**63 - 1), "1" * 20, "01700000000", "+5", ""]
    tags = ["x" * 248, "y" * 249, "n=1", "a b", ""]
    lines = []
    for i in range(4):
        node = f"n{i}"
        lines += [f"host,cluster=c,node={node} load1={v} 5" for v in floats]
        lines += [f"host,cluster=c,node={node} procs_running={v} 5" for v in ints]
        lines += [f"nic,cluster=c,node={node},device=ib0 up={v} 5" for v in bools]
        lines += [f"host,cluster=c,node={node} load1=1 {v}" for v in stamps]
        lines += [f"host,cluster=c,node={v or node} load1=1 5" for v in tags]
        lines += [f"host,cluster={v},node={node} load1=1 5" for v in tags]
        lines += [
            f"host,cluster=c,node={node} =1 5", f"host,=c,node={node} load1=1 5",
            f",cluster=c,node={node} load1=1 5", f"host,cluster=c,node={node}  load1=1 5",
            f"host,cluster=c,node={node} load1=1  5", f"host,cluster=c,node={node} load1=1",
            f"host,cluster=c,node={node} load1= 5", f"host,cluster=c,node={node},node=x load1=1 5",
            f"host,cluster=c,node={node} load1=1,load1=2 5", "host,cluster=c load1=1 5",
            f"host,cluster=c,node={node},extra=e load1=1 5", f"host,cluster=c,node={node} nope=1 5",
            f"host,cluster=c,node={node} load1=1,procs_running=2i 5 6",
        ]  # fmt: skip
    assert_agrees_with_strict(lines, carry_tags)


def test_lines_of_a_kind_too_few_to_read_go_to_the_strict_decoder() -> None:
    """Three lines of a kind are the strict decoder's; four are read as a kind: the same frames."""
    for count in (1, 3, 4, 5):
        lines = [f"host,cluster=c,node=n{i} load1={i}.25 5" for i in range(count)]
        assert_agrees_with_strict(lines, carry_tags=True)


def test_a_line_sent_to_the_strict_decoder_adds_no_tag_value_to_its_kind(
    decoder_path: str,
) -> None:
    """A line whose second tag is empty goes to the strict decoder (which refuses it): its
    first tag's value must not appear among its kind's distinct values."""
    lines = [f"host,cluster=c,node=n{i % 2} load1=1 5" for i in range(6)]
    lines.insert(3, "host,cluster=phantom,node= load1=1 5")
    block = decode_block(lines, carry_tags=True)
    assert len(block.rejects) == 1
    assert_tag_codes_factorize(block.frames)
    if decoder_path == "compiled":
        assert block.frames[0].tag_codes is not None


def test_a_sub_frame_keeps_its_tag_codes_and_pickles_by_them(decoder_path: str) -> None:
    """take() keeps the codes (values may then have no row), split_by_shard routes by them, and
    a frame crossing processes pickles them instead of a str per row: the same tags load."""
    lines = [f"host,cluster=c,node=n{i % 5} load1={i}.5 {i // 5}" for i in range(40)]
    (frame,) = decode_block(lines, carry_tags=True).frames
    part = frame.take(np.arange(40) % 5 < 2)
    assert part.tags["node"].tolist() == ["n0", "n1"] * 8
    if decoder_path == "compiled":
        assert part.tag_codes is not None
        values, codes = part.tag_codes["node"]
        assert values[codes].tolist() == part.tags["node"].tolist()
    for sub in (frame, part):
        loaded = pickle.loads(pickle.dumps(sub))
        assert_same_frames([loaded], [sub])
        assert loaded.tag_codes is None or loaded.tags["node"].tolist() == sub.tags["node"].tolist()
