"""A replay that takes plain lines a run at a time (flows/io/plain_runs.py) gives exactly the
windows, frames and rejects of the line-at-a-time loop, on a capture salted with every kind of
line that must leave a run: comments, blanks, late and far-ahead stamps, a jump of the stream,
stamps that are not plain digits, a NUL, a foreign (Telegraf) line, duplicates; read in small
pieces so that runs cross piece boundaries."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from reflex_localize.flows.io import plain_runs, sources
from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.simulator import Simulation, load_scenario

WINDOW_NS = 10 * 10**9
TELEGRAF = "nvidia_smi,host=node-0001,index=0,uuid=GPU-1 temperature_gpu=61i,power_draw=250.5"


def _capture(seconds: int) -> list[str]:
    sim = Simulation(load_scenario("demo"), seed=3)
    lines: list[str] = []
    for number, chunk in enumerate(sim.chunks(seconds=10)):
        if number * 10 >= seconds:
            break
        for frame in chunk:
            lines += encode_frame(frame)
    return lines


def _stamp(line: str) -> int:
    return int(line.rsplit(" ", 1)[1])


def _salted(lines: list[str], rng: random.Random, foreign: bool) -> list[str]:
    out: list[str] = []
    for number, line in enumerate(lines):
        out.append(line)
        if rng.random() > 0.004:
            continue
        head, stamp = line.rsplit(" ", 1)[0], _stamp(line)
        out.append(
            rng.choice(
                [
                    "# a comment 1700000000000000000",
                    "",
                    "   ",
                    f"{head} {stamp - 4 * WINDOW_NS}",  # late
                    f"{head} {stamp + 40 * WINDOW_NS}",  # far ahead, alone
                    f"{head} {stamp} ",  # trailing space
                    f"{head} +{stamp}",
                    f"{head} {stamp}\0",
                    f"{head} 1_0{stamp}",
                    f"{head} {stamp}",  # a duplicate
                    f"{head} {stamp // 10**9}",  # seconds
                    f"{head} 99999999999999999999",
                    f"{head} {stamp + WINDOW_NS}",  # disorder within the clock
                ]
            )
        )
        if foreign and number % 5000 == 0:
            out.append(f"{TELEGRAF} {stamp}")
    # The stream jumps: 40 lines far ahead, then it goes on from there.
    jump = 60 * WINDOW_NS
    out += [f"{line.rsplit(' ', 1)[0]} {_stamp(line) + jump}" for line in lines[-40:]]
    return out


def _windows(path: Path, runs: bool, monkeypatch: pytest.MonkeyPatch) -> list:
    source = LineProtocolSource(path, 1, 10.0, now_ns=lambda: 2_000_000_000 * 10**9)
    source.piece_chars = 50_000
    with monkeypatch.context() as patch:
        if not runs:  # every line the long way
            patch.setattr(plain_runs.PlainRuns, "end", lambda self, at: at)
        return [
            (window, [line for frame in frames for line in encode_frame(frame)], errors)
            for window, frames, errors in source._windows()
        ]


def _count_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every run the replay takes at once, as it takes them."""
    taken: list[int] = []
    original = sources._Replay.queue_run

    def counting(self, before, lines, runs, at, end):
        taken.append(end - at)
        return original(self, before, lines, runs, at, end)

    monkeypatch.setattr(sources._Replay, "queue_run", counting)
    return taken


def _same_windows(fast: list, slow: list) -> None:
    assert [w for w, _, _ in fast] == [w for w, _, _ in slow]
    for (window, fast_lines, fast_errors), (_, slow_lines, slow_errors) in zip(
        fast, slow, strict=True
    ):
        assert fast_lines == slow_lines, window
        assert fast_errors == slow_errors, window


@pytest.mark.parametrize("foreign", [False, True])
def test_runs_give_the_line_at_a_time_windows(
    foreign: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _salted(_capture(120), random.Random(11), foreign)
    path = tmp_path / "salted.lp"
    path.write_text("\n".join(lines) + "\n")
    taken_in_runs = _count_runs(monkeypatch)
    fast = _windows(path, True, monkeypatch)
    slow = _windows(path, False, monkeypatch)
    assert sum(taken_in_runs) > len(lines) // 2  # the runs did take most lines
    _same_windows(fast, slow)
    reasons = {error.reason for _, _, errors in slow for error in errors}
    assert {"late", "duplicate_point", "timestamp_in_seconds"} <= reasons


def _node_salted(lines: list[str], rng: random.Random) -> list[str]:
    """Lines whose node cannot be read off the tags (so every process decodes them and shard 0's
    counts their rejects), some of them broken too."""
    out = []
    for line in lines:
        roll = rng.random()
        if roll < 0.003:
            line = line.replace(",node=", ",node=a\\ b,x=", 1)  # escaped: decoded to read it
        elif roll < 0.006:
            line = line.replace(",node=", ",node=n1,node=", 1)  # twice: refused
        elif roll < 0.008:
            line = line.replace(",node=", ",node=,x=", 1)  # empty: refused
        elif roll < 0.010:
            line = line.replace(",node=", ",nodes=", 1)  # missing
        elif roll < 0.012:
            line = line.replace(" ", ' x="q" ', 1)  # a quote in the head
        out.append(line)
    return out


def _shard_windows(path: Path, shards: frozenset[int], runs: bool, monkeypatch) -> list:
    source = LineProtocolSource(path, 4, 10.0, now_ns=lambda: 2_000_000_000 * 10**9)
    source.piece_chars = 50_000
    with monkeypatch.context() as patch:
        if not runs:
            patch.setattr(plain_runs.PlainRuns, "end", lambda self, at: at)
        return [
            (window, [line for frame in frames for line in encode_frame(frame)], errors)
            for window, frames, errors in source._pass(shards)
        ]


@pytest.mark.parametrize("shards", [frozenset({0}), frozenset({1, 3})])
def test_a_pass_for_some_shards_takes_runs_as_the_line_at_a_time_loop(
    shards: frozenset[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(17)
    lines = _salted(_node_salted(_capture(60), rng), rng, foreign=True)
    path = tmp_path / "salted.lp"
    path.write_text("\n".join(lines) + "\n")
    taken_in_runs = _count_runs(monkeypatch)
    fast = _shard_windows(path, shards, True, monkeypatch)
    slow = _shard_windows(path, shards, False, monkeypatch)
    assert sum(taken_in_runs) > len(lines) // 2
    _same_windows(fast, slow)
    kept = sum(len(lines_) for _, lines_, _ in slow)
    assert 0 < kept < len(lines) * 0.9  # the pass kept its shards' rows, not every row
    reasons = {error.reason for _, _, errors in slow for error in errors}
    assert ("duplicate_tag" in reasons) == (0 in shards)  # shard 0's process counts those
