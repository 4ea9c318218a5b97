"""The agent's write-ahead journal: segments, cuts, releases and a torn last line."""

from __future__ import annotations

from pathlib import Path

from reflex_localize.collectors.journal import Journal

LINE = "host,cluster=c,node=n load1=0.5 {t}"


def test_what_was_cut_is_released_and_what_was_not_survives(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append([LINE.format(t=1)])
    handed_over = journal.cut()
    journal.append([LINE.format(t=2)])  # after the cut: not yet handed to the writer
    journal.release(handed_over)
    assert Journal(tmp_path).leftover_lines() == [LINE.format(t=2)]


def test_a_torn_last_line_is_dropped_and_numbering_continues(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append([LINE.format(t=1)])
    journal.cut()
    with (tmp_path / "journal-000000000001.lp").open("a") as handle:
        handle.write("host,cluster=c,node=n load1=0.")  # the process died mid-write
    restarted = Journal(tmp_path)
    assert restarted.leftover_lines() == [LINE.format(t=1)]
    restarted.append([LINE.format(t=3)])
    assert [p.name for p in restarted.cut()] == [
        "journal-000000000001.lp",
        "journal-000000000002.lp",
    ]
