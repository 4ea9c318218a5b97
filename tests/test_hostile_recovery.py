"""A recovery directory refuses a flow it cannot resume, in one line and before any process.

Issue 40: restarted with ``--window 5`` over a recovery made with 10, the flow re-read
everything (outputs x3, a second event for the same XID); a changed ``--shards`` or a corrupt
recovery file gave a 74-line panic. ``reflex flow`` now keeps its options beside the state
(:mod:`shell.recovery_guard`) and checks them, and each partition, at every start.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reflex_localize.flows.io.sinks import read_events
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.shell.recovery_guard import PARAMETERS_FILE
from reflex_localize.simulator import Simulation, load_scenario

SECONDS = 330  # the XID 79 of fault_xid79 hits at 300 s


def _flow(source: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()"]
    command += ["flow", "--source", f"file:{source}", "--sink", "files", "--out", str(out)]
    command += extra
    return subprocess.run(command, capture_output=True, text=True, timeout=170)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("recovery")
    source = folder / "replay.lp"
    sim = Simulation(load_scenario("fault_xid79"), seed=7)
    lines: list[str] = []
    for number, chunk in enumerate(sim.chunks(seconds=10)):
        if number * 10 >= SECONDS:
            break
        for frame in chunk:
            lines += encode_frame(frame)
    source.write_text("\n".join(lines) + "\n")
    out = folder / "out"
    done = _flow(source, out, "--cluster", "sim", "--window", "10", "--shards", "2")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "recovery" / PARAMETERS_FILE).exists()
    return source, out


@pytest.mark.parametrize(
    "changed, said",
    [
        (["--window", "5"], "--window 10.0 (now 5.0)"),
        (["--shards", "3"], "--shards 2 (now 3)"),
        (["--cluster", "other"], "--cluster sim (now other)"),
    ],
)
def test_other_options_are_refused_in_one_line(
    first_run: tuple[Path, Path], changed: list[str], said: str
) -> None:
    source, out = first_run
    options = {"--cluster": "sim", "--window": "10", "--shards": "2"}
    options.update(dict(zip(changed[::2], changed[1::2], strict=True)))
    before = (out / "outputs.lp").stat().st_size
    refused = _flow(source, out, *[part for pair in options.items() for part in pair])
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "--recovery-dir" in lines[0], lines
    assert (out / "outputs.lp").stat().st_size == before  # nothing ran


def test_the_same_options_resume_and_emit_nothing_twice(first_run: tuple[Path, Path]) -> None:
    source, out = first_run
    events = read_events(out / "events.jsonl")
    assert any(e.severity == "critical" for e in events)  # the XID's
    again = _flow(source, out, "--cluster", "sim", "--window", "10", "--shards", "2")
    assert again.returncode == 0, again.stderr[-2000:]
    assert [e.event_id for e in read_events(out / "events.jsonl")] == [e.event_id for e in events]


def test_a_corrupt_partition_is_named_in_one_line(tmp_path: Path) -> None:
    recovery = tmp_path / "out" / "recovery"
    recovery.mkdir(parents=True)
    (recovery / "part-0.sqlite3").write_bytes(b"not a database, " * 512)
    source = tmp_path / "one.lp"
    source.write_text("host,cluster=sim,node=n1 load1=0.5 1700000000000000000\n")
    refused = _flow(source, tmp_path / "out")
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "part-0.sqlite3 is not a recovery partition" in lines[0], lines
    assert "file is not a database" in lines[0]


def test_unreadable_saved_options_are_named(tmp_path: Path) -> None:
    recovery = tmp_path / "out" / "recovery"
    recovery.mkdir(parents=True)
    (recovery / PARAMETERS_FILE).write_text("{not json")
    source = tmp_path / "one.lp"
    source.write_text("host,cluster=sim,node=n1 load1=0.5 1700000000000000000\n")
    refused = _flow(source, tmp_path / "out")
    assert refused.returncode == 1
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "cannot read the flow's saved options" in refused.stderr
