"""`reflex demo`, the main job, on its embedded default (no database)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from reflex_localize.flows.io.sinks import read_events
from reflex_localize.shell.cli import main


def test_demo_localizes_the_injected_faults_and_writes_reports(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = CliRunner().invoke(main, ["demo", "--no-live", "--out", str(out)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert result.output.count("correct") == 4, result.output
    assert "wrong" not in result.output and "extra event" not in result.output
    events = read_events(out / "events.jsonl")
    assert len(events) == 4
    assert len(list((out / "reports").glob("*.html"))) == len(events)
    assert len(list((out / "reports").glob("*.png"))) == len(events)
