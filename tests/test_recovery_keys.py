"""A recovery directory written before shard states were placed (flows/io/shard_keys.py) holds
them under the shards' bare names: `reflex flow` refuses it with a clear error rather than
start every shard afresh and drop its node records, and `--shard-keys names` resumes it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from xid79_capture import xid79_chunks

from reflex_localize.flows.io.sinks import read_events
from reflex_localize.shell.recovery_keys import SHARD_STEP, name_keyed_shards

pytestmark = pytest.mark.slow
CLI = [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()", "flow"]


def flow(out: Path, capture: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [*CLI, "--source", f"file:{capture}", "--sink", "files", "--out", str(out)]
    return subprocess.run([*command, *extra], capture_output=True, text=True, timeout=170)


def write_capture(path: Path, seconds: int) -> None:
    path.write_text("".join(line + "\n" for chunk in xid79_chunks(seconds) for line in chunk))


def to_bare_names(directory: Path) -> None:
    """What an older Reflex wrote: the shard step's states keyed by the shard's name."""
    for part in directory.glob("part-*.sqlite3"):
        with sqlite3.connect(part) as connection:
            connection.execute(
                "UPDATE snaps SET state_key = substr(state_key, 1, instr(state_key, '~') - 1)"
                " WHERE step_id = ? AND instr(state_key, '~') > 0",
                (SHARD_STEP,),
            )


def shard_step_keys(directory: Path) -> set[str]:
    keys: set[str] = set()
    for part in directory.glob("part-*.sqlite3"):
        with sqlite3.connect(part) as connection:
            rows = connection.execute(
                "SELECT state_key FROM snaps WHERE step_id = ?", (SHARD_STEP,)
            )
            keys.update(key for (key,) in rows)
    return keys


def test_an_older_recovery_directory_is_refused_then_kept_with_names(tmp_path: Path) -> None:
    out, capture = tmp_path / "flow", tmp_path / "capture.lp"
    write_capture(capture, 200)
    first = flow(out, capture)
    assert first.returncode == 0, first.stderr[-2000:]
    recovery = out / "recovery"
    assert name_keyed_shards(recovery) == [] and shard_step_keys(recovery)
    to_bare_names(recovery)
    assert name_keyed_shards(recovery) == [f"shard-{i}" for i in range(4)]

    write_capture(capture, 360)  # the capture goes on: the resumed flow takes the rest
    refused = flow(out, capture)
    assert refused.returncode == 2
    assert "--shard-keys names" in refused.stderr and "shard-0" in refused.stderr

    kept = flow(out, capture, "--shard-keys", "names")
    assert kept.returncode == 0, kept.stderr[-2000:]
    assert read_events(out / "events.jsonl"), "the XID 79 must be localized after the resume"
    assert shard_step_keys(recovery) == {f"shard-{i}" for i in range(4)}  # none keyed anew
