"""The array readers of value tokens (schemas/line_decoder_values.py) against the strict
decoder's reading of each token (``read_one``: ``float()``, ``int()``, the boolean words): the
same verdict and the very same value, bit for bit, on plain and on awkward spellings."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from reflex_localize.schemas.line_decoder_values import (
    PAD,
    read_bools,
    read_numbers,
    read_one,
    read_strings,
    read_tag_column,
)


def laid_out(tokens: list[str]) -> tuple[bytes, np.ndarray, np.ndarray]:
    """Tokens between spaces, padded as a block's bytes are, and where each stands."""
    raw = b"_" * PAD + " ".join(tokens).encode() + b" " + b"_" * PAD
    lengths = np.array([len(t.encode()) for t in tokens], np.int64)
    starts = PAD + np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
    return raw, starts, starts + lengths


def bits(value: float | int | bool) -> bytes:
    return struct.pack("<d", value) if isinstance(value, float) else repr(value).encode()


def assert_reads_as_strict(tokens: list[str], kind: str) -> None:
    raw, starts, ends = laid_out(tokens)
    values, ok = read_numbers(raw, starts, ends, kind) if kind != "bool" else read_bools(
        raw, starts, ends)  # fmt: skip
    for token, value, read in zip(tokens, values.tolist(), ok.tolist(), strict=True):
        expected = read_one(token, kind)
        assert read == (expected is not None), (kind, token)
        if expected is not None:
            assert bits(value) == bits(expected), (kind, token, value, expected)


AWKWARD = ["0", "-0", "00", "007", ".5", "5.", "-.5", "-5.", ".", "-", "", "--1", "1-", "1.2.3",
           "+5", "1_0", "1e5", "1E-5", "nan", "inf", "-inf", "0x10", " 1", "1 ", "t", "true",
           "5i", "5u", "-5i", "i", "-i", "1.5i", "1e5i", "+5i", "1_0i", "99999999999999.9",
           "999999999999999", "0.000000000000001", "12345678901234.5", "123456789012345.6",
           "9" * 18 + "i", "9" * 19 + "i", "-" + "9" * 18 + "i", "9223372036854775806",
           "9223372036854775807", "9223372036854775808", "9" * 19, "1" + "0" * 19, "0" * 24,
           "0" * 25 + "1", "-0.0", "0.1", "0.3", "2.675", "1.7976931348623157", "4.35"]  # fmt: skip


@pytest.mark.parametrize("kind", ["float", "int", "time", "bool"])
def test_awkward_spellings_read_as_the_strict_decoder_reads_them(kind: str) -> None:
    assert_reads_as_strict([*AWKWARD, "t", "T", "TRUE", "False", "f", "FALSE", "yes"], kind)


def test_floats_as_python_writes_them_read_back_bit_for_bit() -> None:
    rng = random.Random(5)
    floats = [rng.uniform(-1e6, 1e6) for _ in range(3_000)]
    floats += [round(rng.uniform(0, 1000), rng.randint(0, 8)) for _ in range(3_000)]
    floats += [struct.unpack("<d", rng.randbytes(8))[0] for _ in range(1_000)]
    assert_reads_as_strict([repr(f) for f in floats if np.isfinite(f)], "float")


def test_decimal_spellings_of_every_length_read_bit_for_bit() -> None:
    """Up to 16 digits with the point anywhere: around the 14 digits the fast reading takes."""
    rng = random.Random(6)
    tokens = []
    for _ in range(6_000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 16)))
        point = rng.randint(0, len(digits))
        sign = rng.choice(["", "", "-"])
        tokens.append(sign + (digits[:point] + "." + digits[point:] if rng.random() < 0.8
                              else digits))  # fmt: skip
    assert_reads_as_strict(tokens, "float")
    assert_reads_as_strict([t.replace(".", "") + "i" for t in tokens], "int")
    assert_reads_as_strict([t.replace(".", "").lstrip("-") for t in tokens], "time")


def test_integers_of_every_length_up_to_the_limits() -> None:
    rng = random.Random(7)
    ints = [rng.randint(-(2**63), 2**63 - 1) >> rng.randint(0, 63) for _ in range(3_000)]
    assert_reads_as_strict([f"{i}i" for i in ints], "int")
    stamps = [rng.randint(0, 2**64) >> rng.randint(0, 63) for _ in range(3_000)]
    assert_reads_as_strict([str(s) for s in stamps] + [str(2**63 - 2), str(2**63 - 1)], "time")


def test_tag_values_repeat_as_one_str_each_and_read_exactly() -> None:
    rng = random.Random(8)
    pool = ["a", "node-0001", "node-0002", "h100-sxm5-80gb", "x" * 8, "x" * 9, "x" * 16,
            "y" * 200, "node-0001" + "z" * 30, "node-0001" + "z" * 31]  # fmt: skip
    values = [rng.choice(pool) for _ in range(2_000)]
    raw, starts, ends = laid_out(values)
    column, ok = read_tag_column(raw, starts, ends)
    assert ok.all() and column.dtype == object and column.tolist() == values
    same, ok = read_tag_column(raw, starts[:3].repeat(3), ends[:3].repeat(3))
    assert same.tolist() == [v for v in values[:3] for _ in range(3)]
    constant, ok = read_tag_column(raw, starts[:1].repeat(5), ends[:1].repeat(5))
    assert constant.tolist() == values[:1] * 5


def test_a_tag_value_longer_than_the_readers_reach_is_left_to_the_strict_decoder() -> None:
    raw, starts, ends = laid_out(["short", "w" * (PAD + 10)])
    column, ok = read_tag_column(raw, starts, ends)
    assert ok.tolist() == [True, False] and column[0] == "short"


def test_string_tokens_must_be_quoted_whole() -> None:
    tokens = ['"NVIDIA H100, 80GB=x"', '""', '"a"b"', "plain", '"', '"open', 'shut"']
    raw, starts, ends = laid_out(tokens)
    values, ok = read_strings(raw, starts, ends)
    assert ok.tolist() == [True, True, True, False, False, False, False]
    assert values[:3].tolist() == ["NVIDIA H100, 80GB=x", "", 'a"b']
