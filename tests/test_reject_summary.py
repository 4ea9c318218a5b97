"""`reflex localize` and a `reflex flow` run that ends print what they rejected, by where and
reason code (before: a dict on one line, or nothing at all)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from reflex_localize.shell.cli import main

LINES = (
    "host,cluster=c,node=n1 load1=0.5 1767225600000000000\n"
    "host,cluster=c,node=n1 load1=0.5 1767225600000000000\n"  # a duplicate
    "garbage\n"
    "host,cluster=c,node=n1 load1=0.6 1767225600\n"  # seconds
)


def _replay(tmp_path: Path) -> Path:
    path = tmp_path / "replay.lp"
    path.write_text(LINES)
    return path


def _has_table(text: str) -> bool:
    rows = ("duplicate_point", "bad_sections", "timestamp_in_seconds")
    return "3 records rejected" in text and all(f"│ {row}" in text for row in rows)


def test_localize_prints_the_rejects_by_reason(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["localize", "--replay", str(_replay(tmp_path))])
    assert result.exit_code == 0, result.output
    assert _has_table(result.output), result.output


def test_a_flow_run_that_ends_prints_the_rejects_by_reason(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "reflex_localize", "flow", "--source"]
    command += [f"file:{_replay(tmp_path)}", "--sink", "files", "--out", str(tmp_path / "out")]
    done = subprocess.run([*command, "--no-recovery"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _has_table(done.stderr), done.stderr[-2000:]
