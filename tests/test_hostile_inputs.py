"""Bounded memory on any input (issue 40): a 50 MB line took 25 s and 1.2 GB, and
``file:/dev/zero`` passed the check and grew without end.

Now a line longer than ``MAX_LINE_CHARS`` is refused by the decoders (``line_too_long``) and
read past by the file reader without being held, and a replay source must be a regular file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest

from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.runner import run_in_process
from reflex_localize.schemas.codec import MAX_LINE_CHARS, PointError, decode
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.schemas.line_decoder import decode_block
from reflex_localize.schemas.line_file import data_pieces
from reflex_localize.simulator import Simulation, load_scenario

LINE = "host,cluster=c,node=n1 load1=0.5 1700000000000000000"
LONG = "host,cluster=c,node=n1 load1=0.5," + "x" * (MAX_LINE_CHARS + 10) + "=1 1700000000000000000"


def test_both_decoders_refuse_a_long_line_with_its_reason() -> None:
    with pytest.raises(PointError) as refused:
        decode(LONG)
    assert refused.value.code == "line_too_long" and "over the limit of 1,048,576" in str(
        refused.value
    )
    block = decode_block([LINE, LONG, LINE])
    assert [(p, e.code) for p, e in block.rejects] == [(1, "line_too_long")]  # type: ignore[attr-defined]
    assert sum(len(frame) for frame in block.frames) == 2


def _pieces(path: Path, piece_bytes: int) -> tuple[list[tuple[int, str]], list[tuple[int, int]]]:
    long: list[tuple[int, int]] = []
    numbered = [
        (before + offset, line)
        for before, lines, _ in data_pieces(
            path, piece_bytes, max_line=1000, on_long_line=lambda n, size: long.append((n, size))
        )
        for offset, line in enumerate(lines, 1)
    ]
    return numbered, long


@pytest.mark.parametrize("piece_bytes", [64, 700, 5000, 1 << 20])
def test_a_long_line_is_read_past_and_told_of_with_its_number(
    tmp_path: Path, piece_bytes: int
) -> None:
    path = tmp_path / "lines.lp"
    path.write_text("a 1\n" + "y" * 3000 + "\nb 2\n" + "z" * 1001 + "\nc 3\n" + "w" * 5000)
    numbered, long = _pieces(path, piece_bytes)
    assert [(n, line) for n, line in numbered if line] == [(1, "a 1"), (3, "b 2"), (5, "c 3")]
    assert [n for n, _ in long] == [2, 4, 6]
    assert long[0][1] >= 1000 and long[2][1] >= 1000


def test_reading_a_huge_line_holds_no_more_than_a_piece_and_a_line(tmp_path: Path) -> None:
    path = tmp_path / "huge.lp"
    with path.open("wb") as handle:  # 64 MB on one line, between two good ones
        handle.write(LINE.encode() + b"\n")
        for _ in range(64):
            handle.write(b"9" * (1 << 20))
        handle.write(b"\n" + LINE.encode() + b"\n")
    long: list[tuple[int, int]] = []
    tracemalloc.start()
    try:
        kept = [
            line
            for _, lines, _ in data_pieces(path, on_long_line=lambda n, s: long.append((n, s)))
            for line in lines
            if line
        ]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kept == [LINE, LINE] and [n for n, _ in long] == [2]
    # A 4 MiB piece held as bytes, joined to the rest of its first line, text and lines: what
    # any file's reading holds, whatever the length of its lines.
    assert peak < 24 << 20, f"{peak / 2**20:.0f} MiB held for a 64 MiB line"


def test_a_replay_with_a_long_line_refuses_it_and_finds_the_xid(tmp_path: Path) -> None:
    sim = Simulation(load_scenario("fault_xid79"), seed=7)
    lines: list[str] = []
    for number, chunk in enumerate(sim.chunks(seconds=10)):
        if number * 10 >= 330:
            break
        for frame in chunk:
            lines += encode_frame(frame)
    lines.insert(len(lines) // 3, LONG)
    path = tmp_path / "replay.lp"
    path.write_text("\n".join(lines) + "\n")
    result = run_in_process(LineProtocolSource(path, 2, 10.0))
    assert result.error_counts == Counter({"line_too_long": 1})
    assert any(e.trigger == "explicit" and e.severity == "critical" for e in result.events)


def _flow(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_a_device_or_a_fifo_is_no_replay(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.lp"
    os.mkfifo(fifo)
    for source, kind in (("/dev/zero", "a device or socket"), (str(fifo), "a FIFO")):
        refused = _flow("flow", "--source", f"file:{source}", "--sink", "files",
                        "--out", str(tmp_path / "out"))  # fmt: skip
        assert refused.returncode == 2
        error = refused.stderr.strip().splitlines()[-1]
        assert error.startswith("Error: Invalid value for '--source'") and kind in error, error
        assert "Traceback" not in refused.stderr
    refused = _flow("localize", "--replay", "/dev/zero")
    assert refused.returncode == 2 and "not a regular file" in refused.stderr
