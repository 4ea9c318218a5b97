"""The line-protocol file reader: the quick reads of a line's raw text (a tag of its head, its
timestamp) either agree with the decoder or answer None and leave the line to it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from reflex_localize.schemas.codec import Point, PointError, decode, encode
from reflex_localize.schemas.foreign_mapping import load_foreign_mapping
from reflex_localize.schemas.line_decoder_compiled import compiled_available
from reflex_localize.schemas.line_file import (
    PieceLines,
    PieceText,
    data_lines,
    data_pieces,
    is_data,
    line_stamp,
    raw_tag,
)

STAMP = 1_700_000_000_000_000_000


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ("host,cluster=c,node=n7", "n7"),
        ("host,node=n7,cluster=c", "n7"),
        ("host,cluster=c,nodename=x,node=n7", "n7"),  # another key that starts alike
        ("host,cluster=c,node=a=b", "a=b"),  # the decoder splits a pair at its first "="
        ("host,cluster=c,node=n\\ 7", None),  # escaped: only the decoder can tell
        ("host,cluster=c\\,x,node=n7", None),  # an escape elsewhere in the head is enough
        ('host,cluster=c,node=n"7', None),  # quoted
        ("host,cluster=c", None),  # missing
        ("host,cluster=c,node=a,node=b", None),  # twice: the decoder refuses the line
        ("host,cluster=c,node=", None),  # empty: refused too
    ],
)
def test_a_raw_tag_is_read_off_the_head_only_when_safe(head: str, expected: str | None) -> None:
    assert raw_tag(f"{head} load1=0.5 {STAMP}", "node") == expected


def test_a_tag_is_never_read_from_the_fields_or_a_headless_line() -> None:
    assert raw_tag(f'event,cluster=c,kind=k message=",node=n1" {STAMP}', "node") is None
    assert raw_tag("host,cluster=c,node=n1", "node") is None  # no space: no fields, no head end


_HOSTILE_TEXT = st.text(alphabet='ab ,=\\"', min_size=1, max_size=8)


@given(node=_HOSTILE_TEXT, cluster=_HOSTILE_TEXT)
def test_a_raw_tag_agrees_with_the_decoder(node: str, cluster: str) -> None:
    point = Point("host", {"cluster": cluster, "node": node}, {"load1": 0.5}, STAMP)
    try:
        line = encode(point)
    except PointError:
        return  # a value line protocol cannot carry
    read = raw_tag(line, "node")
    assert read is None or read == decode(line).tags["node"]
    if not set(node + cluster) & set(',= \\"'):
        assert read == node  # a plain line is always read without decoding


@pytest.mark.parametrize(
    ("stamp", "expected"),
    [
        (str(STAMP), STAMP),
        (f"{STAMP}\r", STAMP),
        ("+5", None),
        ("1_0", None),
        ("\u0661\u0662", None),  # Arabic-Indic digits: int() takes them, InfluxDB does not
        (str(1 << 63), None),
        ("1" * 20, None),
    ],
)
def test_a_timestamp_is_plain_decimal_nanoseconds(stamp: str, expected: int | None) -> None:
    assert line_stamp(f"host,cluster=c,node=n load1=0.5 {stamp}") == expected
    assert line_stamp("host,cluster=c,node=n load1=0.5") is None


def test_data_lines_skip_blanks_and_comments_and_count_every_line(tmp_path: Path) -> None:
    path = tmp_path / "capture.lp"
    path.write_bytes(b"# capture\n\nhost,node=a load1=1 1\n   \nhost,node=\xff load1=2 2\n")
    assert list(data_lines(path)) == [
        (3, "host,node=a load1=1 1"),
        (5, "host,node=\ufffd load1=2 2"),
    ]


def test_data_lines_read_in_pieces_as_line_by_line(tmp_path: Path) -> None:
    """Lines cut across the reader's pieces, CRLF and lone CR endings, blanks, comments and a
    last line without a newline: the same numbers and texts as reading line by line."""
    lines = [f"host,node=n{i} load1={i} {i}" for i in range(40_000)]
    for at, odd in ((7, ""), (11, "  \t"), (13, "# note"), (17_000, ""), (29_999, "#")):
        lines[at] = odd
    text = "\r\n".join(lines[:20_000]) + "\r" + "\n".join(lines[20_000:])
    path = tmp_path / "pieces.lp"
    path.write_text(text, newline="")
    with path.open(errors="replace") as handle:
        expected = [
            (number, line.rstrip("\n"))
            for number, line in enumerate(handle, 1)
            if not line.isspace() and not line.startswith("#")
        ]
    assert len(text) > 1 << 20 and list(data_lines(path, piece_bytes=1 << 16)) == expected


_HOSTILE_BYTES = st.lists(
    st.sampled_from([b"\n", b"\r", b"\r\n", b" ", b"#", b"0", b"7", b"12", b"m,a=1 f=1 ", b"\xff",
                     "\u00e9".encode(), b"\x00", b"nvidia_smi,", b"+", b"DCGM_FI_X ", b"DCGM_F"]),
    max_size=60,
)  # fmt: skip


@given(parts=_HOSTILE_BYTES, piece=st.integers(1, 12))
def test_pieces_are_the_lines_text_mode_reads_and_their_bytes(
    parts: list[bytes], piece: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Binary pieces cut at any size: the lines text mode reads (CR and CRLF endings, bytes
    that are not UTF-8 replaced), numbered alike, with bytes that hold their line breaks."""
    path = tmp_path_factory.mktemp("pieces") / "capture.lp"
    path.write_bytes(b"".join(parts))
    with path.open(errors="replace", encoding="utf-8") as handle:
        text = handle.read()
    expected = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n") if text else []
    for lazy in (False, True):  # lazy: pieces read as str line by line when asked (PieceText)
        read: list[str] = []
        for before, lines, view in data_pieces(path, piece, lazy=lazy):
            raw = bytes(view)  # (lazy: a view of the file mapped into memory)
            assert before == len(read)
            assert raw.split(b"\n") == [line.encode() for line in lines] or not raw.isascii()
            assert raw.count(b"\n") == len(lines) - 1
            read += lines
        assert read == expected


@given(parts=_HOSTILE_BYTES)
@example(parts=[b"12 ", b"\n", b"m,a=1 f=1 ", b"7"])  # a stamp and a space: not plain
def test_a_piece_reads_stamps_and_heads_as_each_line_does(parts: list[bytes]) -> None:
    """PieceLines' array reads against the one-line reads: a stamp where it is plain digits
    ending the line (else -1), a foreign measurement wherever the translator would see one."""
    raw = b"".join(parts).replace(b"\r", b"")
    lines = raw.decode("utf-8", "replace").split("\n")
    piece = PieceLines.of(lines, raw)
    assert compiled_available()  # so that both readings are checked
    lazy = PieceLines.of(PieceText.of(raw), raw)
    for stamps in (piece.plain_stamps(), piece.numpy_plain_stamps(), lazy.plain_stamps()):
        for line, stamp in zip(lines, stamps.tolist(), strict=True):
            word = line.rpartition(" ")[2]
            plain = is_data(line) and word.isascii() and word.isdigit()
            expected = line_stamp(line) if plain else None
            assert stamp == (-1 if expected is None else expected), line
    for reading in (piece, lazy):
        codes, heads = reading.heads()
        assert len(set(heads)) == len(heads)
        expected_heads = [line[: line.find(" ") + 1] if " " in line else line for line in lines]
        assert [heads[code] for code in codes.tolist()] == expected_heads
    names = {"nvidia_smi", "m", "7", "#", "nvidia_smi_longer"}
    foreign = load_foreign_mapping().names()  # a set of names and a prefix
    for reading in (piece, lazy):
        for wanted in (names, foreign):
            for found in (reading.measured_as(wanted), reading.numpy_measured_as(wanted)):
                for line, one in zip(lines, found.tolist(), strict=True):
                    assert one == (line.partition(",")[0].partition(" ")[0] in wanted), line
