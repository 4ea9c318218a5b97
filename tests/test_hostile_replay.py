"""A replay with hostile lines: stamps from the future, in the wrong unit, duplicated, garbled.
The fault in the valid part is still found, and every bad line is counted under a fixed code.

Before the window clock learned to distrust single lines (flows/io/stream_clock.py), two lines
stamped 50 years ahead dropped 300k lines as late, missed the XID 79 and raised a false hang
dated 2075.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.runner import RunResult, run_in_process
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.simulator import Simulation, load_scenario

SECONDS = 400  # the XID 79 of fault_xid79 hits at 300 s
YEAR_NS = 365 * 86_400 * 10**9


@pytest.fixture(scope="module")
def clean_lines() -> list[str]:
    sim = Simulation(load_scenario("fault_xid79"), seed=7)
    lines: list[str] = []
    for number, chunk in enumerate(sim.chunks(seconds=10)):
        if number * 10 >= SECONDS:
            break
        for frame in chunk:
            lines += encode_frame(frame)
    return lines


@pytest.fixture(scope="module")
def clean_run(clean_lines: list[str], tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    return _replay(clean_lines, tmp_path_factory.mktemp("clean"))


def _replay(lines: list[str], directory: Path) -> RunResult:
    path = directory / "replay.lp"
    path.write_text("\n".join(lines) + "\n")
    return run_in_process(LineProtocolSource(path, 1, 10.0))


def _restamp(line: str, stamp: int | str) -> str:
    return f"{line.rsplit(' ', 1)[0]} {stamp}"


def _stamp(line: str) -> int:
    return int(line.rsplit(" ", 1)[1])


def _found_the_xid(result: RunResult) -> bool:
    return any(
        e.trigger == "explicit" and e.top and e.top.component == "gpu" for e in result.events
    )


def test_the_clean_replay_finds_the_xid(clean_run: RunResult) -> None:
    assert _found_the_xid(clean_run) and not clean_run.errors


def test_two_lines_fifty_years_ahead_change_nothing(
    clean_lines: list[str], clean_run: RunResult, tmp_path: Path
) -> None:
    lines = list(clean_lines)
    at = len(lines) // 10
    for offset, index in enumerate((at, at + 500)):
        lines[index] = _restamp(
            lines[index], _stamp(lines[index]) + 50 * YEAR_NS + offset * 31 * 10**9
        )
    result = _replay(lines, tmp_path)
    assert result.error_counts == Counter({"timestamp_in_future": 2})
    assert [e.event_id for e in result.events] == [e.event_id for e in clean_run.events]


def test_lines_minutes_ahead_of_the_stream_are_outliers_not_the_clock(
    clean_lines: list[str], clean_run: RunResult, tmp_path: Path
) -> None:
    lines = list(clean_lines)
    for index in range(1000, len(lines), 40_000):  # 10 minutes ahead: behind the wall clock
        lines[index] = _restamp(lines[index], _stamp(lines[index]) + 600 * 10**9)
    bad = len(range(1000, len(lines), 40_000))
    result = _replay(lines, tmp_path)
    assert result.error_counts == Counter({"timestamp_ahead_of_stream": bad})
    assert [e.event_id for e in result.events] == [e.event_id for e in clean_run.events]


def test_a_real_gap_in_the_capture_is_followed(clean_lines: list[str], tmp_path: Path) -> None:
    """Two hours missing from the middle of a capture: the clock jumps, nothing is refused."""
    half = len(clean_lines) // 2
    lines = clean_lines[:half] + [
        _restamp(line, _stamp(line) + 7200 * 10**9) for line in clean_lines[half:]
    ]
    result = _replay(lines, tmp_path)
    assert not result.errors, result.error_counts
    assert result.point_counts["reflex_score"] > 0


def test_unit_mistakes_are_named(clean_lines: list[str], tmp_path: Path) -> None:
    lines = list(clean_lines)
    lines[10] = _restamp(lines[10], _stamp(lines[10]) // 10**9)
    lines[11] = _restamp(lines[11], _stamp(lines[11]) // 10**6)
    lines[12] = _restamp(lines[12], _stamp(lines[12]) // 10**3)
    lines[13] = _restamp(lines[13], 5)
    result = _replay(lines, tmp_path)
    assert result.error_counts == Counter(
        {
            "timestamp_in_seconds": 1,
            "timestamp_in_milliseconds": 1,
            "timestamp_in_microseconds": 1,
            "timestamp_before_stream": 1,
        }
    )
    assert _found_the_xid(result)


def test_duplicate_lines_are_counted_once_each(
    clean_lines: list[str], clean_run: RunResult, tmp_path: Path
) -> None:
    copies = clean_lines[5000:5100]
    lines = clean_lines[:5100] + copies + clean_lines[5100:]
    result = _replay(lines, tmp_path)
    assert result.error_counts == Counter({"duplicate_point": len(copies)})
    assert [e.event_id for e in result.events] == [e.event_id for e in clean_run.events]


def test_five_percent_of_lines_broken_in_mixed_ways(clean_lines: list[str], tmp_path: Path) -> None:
    rng = random.Random(5)
    lines = list(clean_lines)
    breakers = [
        lambda line: line[: len(line) // 2],  # truncated
        lambda line: _restamp(line, _stamp(line) + 40 * YEAR_NS),  # far future
        lambda line: _restamp(line, _stamp(line) // 10**9),  # seconds
        lambda line: line.replace("=", "", 1),  # garbled key=value
        lambda line: "x" + line,  # undeclared measurement
    ]
    broken = rng.sample(range(len(lines)), len(lines) // 20)
    for index in broken:
        lines[index] = rng.choice(breakers)(lines[index])
    result = _replay(lines, tmp_path)
    assert _found_the_xid(result)
    assert not any(e.trigger == "hang" for e in result.events)
    counted = sum(result.error_counts.values())
    # Every broken line is counted; a few breaks leave a valid line (a truncation at a field
    # boundary that keeps a timestamp-less line is still a reject; "x"+gpu is undeclared).
    assert counted == len(broken), result.error_counts
    assert set(result.error_counts) <= {
        "bad_sections", "bad_key_value", "bad_value", "no_timestamp", "timestamp_in_future",
        "timestamp_in_seconds", "undeclared_measurement", "bad_timestamp", "unterminated_string",
        "timestamp_not_plain_ns", "late", "duplicate_point", "timestamp_before_stream",
    }  # fmt: skip


def test_reject_counts_are_exported_as_points(clean_lines: list[str], tmp_path: Path) -> None:
    """The flow's rejects reach InfluxDB too (reflex_rejects), totalled per window and code."""
    lines = list(clean_lines)
    for index in (100, 200, 300):
        lines[index] = _restamp(lines[index], _stamp(lines[index]) // 10**9)
    path = tmp_path / "replay.lp"
    path.write_text("\n".join(lines) + "\n")
    exported: Counter[str] = Counter()

    def collect(route: str, item: object) -> None:
        if route == "points":
            for point in item:  # type: ignore[attr-defined]
                if point.measurement == "reflex_rejects":
                    exported[point.tags["reason"]] += int(point.fields["records"])

    result = run_in_process(LineProtocolSource(path, 1, 10.0), on_output=collect)
    assert exported == result.error_counts == Counter({"timestamp_in_seconds": 3})


def test_a_telegraf_host_tag_on_every_line_is_carried(
    clean_lines: list[str], clean_run: RunResult, tmp_path: Path
) -> None:
    """Telegraf adds host= to every point. Once the schema refused them all (0 events for an
    XID 79 that, clean, gives one); now the tag is carried and counted."""
    tagged = [line.replace(",", ",host=telegraf-7,", 1) for line in clean_lines]
    path = tmp_path / "tagged.lp"
    path.write_text("\n".join(tagged) + "\n")
    carried = Counter[str]()

    def collect(route: str, item: object) -> None:
        if route == "points":
            for point in item:  # type: ignore[attr-defined]
                if point.measurement == "reflex_rejects" and point.tags["where"] == "carried":
                    carried[point.tags["reason"]] += int(point.fields["records"])

    result = run_in_process(LineProtocolSource(path, 1, 10.0), on_output=collect)
    assert not result.errors, result.error_counts
    assert [e.event_id for e in result.events] == [e.event_id for e in clean_run.events]
    assert carried == Counter({"foreign_tag": len(tagged)})


def test_each_shards_reject_counts_are_a_series_of_their_own(
    clean_lines: list[str], tmp_path: Path
) -> None:
    """Shards count the same window's rejects apart. In InfluxDB a point of the same series and
    time replaces the one before, so without its shard's tag only one shard's count was kept."""
    tagged = [line.replace(",", ",host=telegraf-7,", 1) for line in clean_lines]
    path = tmp_path / "tagged.lp"
    path.write_text("\n".join(tagged) + "\n")
    series: Counter[tuple[str, tuple[tuple[str, str], ...], int]] = Counter()
    carried = 0

    def collect(route: str, item: object) -> None:
        nonlocal carried
        if route == "points":
            for point in item:  # type: ignore[attr-defined]
                if point.measurement == "reflex_rejects" and point.tags["where"] == "carried":
                    tags = tuple(sorted(point.tags.items()))
                    series[(point.tags.get("shard", ""), tags, point.time_ns)] += 1
                    carried += int(point.fields["records"])

    run_in_process(LineProtocolSource(path, 4, 10.0), on_output=collect)
    assert carried == len(tagged)
    assert {shard for shard, _, _ in series} == {f"shard-{i}" for i in range(4)}
    assert max(series.values()) == 1, "two shards' counts would overwrite each other"
