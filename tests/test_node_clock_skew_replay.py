"""One node's clock 40 s off in a replayed capture while an XID 79 hits another node.

The capture is fault_xid79 (seed 7): node-0006's GPU 3 falls off the bus at 300 s; node-0002,
a healthy node of the same job, has every line stamped 40 s ahead or 40 s behind. The replay
finds node-0002's offset from its lines against the other nodes', re-stamps them, and tells it
as that node's clock fault: the XID's critical event comes out naming node-0006 GPU 3, and
node-0002 is neither blamed nor called missing. Every shard and every byte range of a replay
re-stamps the same lines. And a node whose clock goes off only after the surveyed start never
moves the window clock: only its own lines are refused.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_line_protocol_ranges import assert_ranges_give_the_whole_pass
from test_line_protocol_shards import assert_same_as_one_shard, replay, simulated_lines
from xid79_capture import xid79_chunks

from reflex_localize.flows.io.node_clocks import node_offsets
from reflex_localize.flows.io.range_replay import LineProtocolRanges
from reflex_localize.flows.io.sinks import read_events
from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.runner import RunResult, run_in_process
from reflex_localize.schemas.line_file import raw_tag

WINDOW_S = 10.0
SKEWED = "node-0002"
XID = ("explicit", "critical", ("node-0006", "gpu", "3"))
CLI = [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()", "flow"]


@pytest.fixture(scope="module")
def capture() -> list[str]:
    return [line for chunk in xid79_chunks(360) for line in chunk]


def _skewed(lines: list[str], shift_s: int, from_line: int = 0) -> list[str]:
    """``lines`` with the stamp of each line of node-0002 from ``from_line`` on moved."""
    out = list(lines)
    for at in range(from_line, len(out)):
        if raw_tag(out[at], "node") == SKEWED:
            head, stamp = out[at].rsplit(" ", 1)
            out[at] = f"{head} {int(stamp) + shift_s * 10**9}"
    return out


def _write(directory: Path, lines: list[str]) -> Path:
    path = directory / "capture.lp"
    path.write_text("\n".join(lines) + "\n")
    return path


def _told(result: RunResult) -> list[tuple[str, str, tuple[str, str, str]]]:
    return [
        (e.trigger, e.severity, (e.top.node, e.top.component, e.top.index))
        for e in result.events
        if e.top is not None
    ]


@pytest.mark.parametrize("shift_s", [40, -40])
def test_a_node_clock_40_s_off_is_re_stamped_and_told_as_its_clock_fault(
    capture: list[str], tmp_path: Path, shift_s: int, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        result = run_in_process(LineProtocolSource(_write(tmp_path, _skewed(capture, shift_s)), 1))
    assert _told(result) == [XID]  # node-0002: no hardware blame, no drain, not missing
    assert not any(e.top and e.top.node == SKEWED for e in result.events)
    [fault] = result.errors  # nothing else set aside: no line late, none ahead
    way = "ahead of" if shift_s > 0 else "behind"
    assert fault.reason == "node_clock_skew"
    assert f"node {SKEWED} of cluster sim: its clock runs 40.0 s {way}" in fault.detail
    assert f"re-stamped by {-shift_s:+.1f} s" in fault.detail
    assert [r.getMessage() for r in caplog.records if "clock" in r.getMessage()] == [fault.detail]


def test_every_shard_and_byte_range_re_stamps_the_same_lines(tmp_path: Path) -> None:
    """Each shard's pass (together, and each in a process of its own) and each byte range's
    gives the rows and rejects one pass gives: node-0002's lines all re-stamped alike."""
    path = _write(tmp_path, _skewed(simulated_lines(40), 40))
    (single,) = replay(path, 1)
    assert [e.reason for _, _, errors in single for e in errors] == ["node_clock_skew"]
    assert_same_as_one_shard(path, 3)
    assert_ranges_give_the_whole_pass(path, 3, 3)


def test_the_byte_range_replay_finds_the_xid_and_tells_the_clock_fault_once(
    capture: list[str], tmp_path: Path
) -> None:
    path = _write(tmp_path, _skewed(capture, 40))
    whole = run_in_process(LineProtocolSource(path, 4))
    split = run_in_process(LineProtocolRanges(path, 4, WINDOW_S, n_ranges=3))
    assert _told(split) == _told(whole) == [XID]
    assert split.error_counts == whole.error_counts == {"node_clock_skew": 1}


@pytest.mark.slow
def test_two_processes_replaying_by_range_find_the_same(capture: list[str], tmp_path: Path) -> None:
    """`reflex flow -p 2`: each process surveys the file itself and re-stamps alike."""
    path = _write(tmp_path, _skewed(capture, -40))
    out = tmp_path / "out"
    command = [*CLI, "--source", f"file:{path}", "--sink", "files", "--out", str(out)]
    command += ["--no-recovery", "--shards", "4", "--cluster", "sim", "-p", "2"]
    done = subprocess.run(command, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    told = [(e.trigger, e.severity, (e.top.node, e.top.component, e.top.index))
            for e in read_events(out / "events.jsonl") if e.top is not None]  # fmt: skip
    assert told == [XID]
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    assert [e["reason"] for e in errors] == ["node_clock_skew"]
    assert f"node {SKEWED} of cluster sim" in errors[0]["detail"]


@pytest.mark.parametrize("shift_s", [40, 3600])
def test_a_clock_that_goes_off_after_the_survey_never_moves_the_window_clock(
    capture: list[str], tmp_path: Path, shift_s: int
) -> None:
    """Its lines far ahead agree with each other, but come from one node: the stream goes on
    without them, and they alone are refused; the other nodes' lines are all read."""
    later = len(capture) // 3
    lines = _skewed(capture, shift_s, from_line=later)
    source = LineProtocolSource(_write(tmp_path, lines), 1)
    source.survey_bytes = 1 << 16  # the survey sees only the start, where the clock was right
    result = run_in_process(source)
    moved = sum(raw_tag(line, "node") == SKEWED for line in lines[later:])
    assert result.error_counts == {"timestamp_ahead_of_stream": moved}
    assert XID in _told(result)


def test_one_vote_a_node_however_many_lines_it_writes() -> None:
    """A node that writes nine lines in ten is found off, and judges no other node off; a node
    that stamps in seconds (its offset grows line by line) is left to the stamp check."""
    rng = np.random.default_rng(3)
    seconds = np.sort(rng.uniform(0, 600, 40_000))
    nodes = np.where(rng.uniform(size=len(seconds)) < 0.9, 0, rng.integers(1, 6, len(seconds)))
    stamps = (1_700_000_000 + seconds) * 1e9
    for chatty_offset_s in (0, 40, -40):
        shifted = np.where(nodes == 0, stamps + chatty_offset_s * 1e9, stamps).astype(np.int64)
        found = node_offsets(nodes, shifted, list("abcdef"), block_lines=512)
        assert {n: round(e.offset_s) for n, e in found.items()} == (
            {"a": chatty_offset_s} if chatty_offset_s else {}
        )
    in_seconds = np.where(nodes == 5, stamps // 10**9, stamps).astype(np.int64)
    assert node_offsets(nodes, in_seconds, list("abcdef"), block_lines=512) == {}


def test_a_capture_of_too_few_nodes_judges_none() -> None:
    """Three nodes cannot tell which of them is off: no node is judged."""
    nodes = np.array([0, 1, 2] * 200)
    stamps = np.repeat(np.arange(200), 3) * 10**9
    stamps[nodes == 2] += 40 * 10**9
    assert node_offsets(nodes, stamps, ["a", "b", "c"], block_lines=60) == {}
