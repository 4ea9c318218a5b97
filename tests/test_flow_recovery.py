"""`reflex flow` survives a SIGKILL: restarted on its recovery directory it loses no
localization event, duplicates none, and its baselines continue where they were."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from reflex_localize.flows.io.sinks import read_events
from reflex_localize.schemas.codec import decode

pytestmark = pytest.mark.slow
SOURCE = "sim:demo:7"  # 32 nodes, 10 minutes, three localization events


def flow(out: Path, *extra: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()", "flow"]
    command += ["--source", SOURCE]
    command += ["--sink", "files", "--out", str(out), "--cluster", "sim", *extra]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def finish(process: subprocess.Popen[bytes]) -> None:
    _, stderr = process.communicate(timeout=170)
    assert process.returncode == 0, stderr.decode()[-2000:]


def baseline_counts(path: Path) -> dict[str, list[tuple[int, int]]]:
    """(time, count) of every exported baseline, per entity and signal, in file order."""
    series: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for line in path.read_text().splitlines():
        if line.startswith("reflex_baseline"):
            point = decode(line)
            key = ",".join(f"{k}={v}" for k, v in sorted(point.tags.items()))
            series[key].append((point.time_ns, int(point.fields["count"])))
    return series


def test_sigkill_mid_stream_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    finish(flow(reference, "--no-recovery"))
    expected = read_events(reference / "events.jsonl")
    assert len(expected) >= 2

    out = tmp_path / "crashing"
    first = flow(out, "-s", "1")
    deadline = time.monotonic() + 120
    outputs = out / "outputs.lp"
    # Kill once some results are out, before the run is over.
    while not (outputs.exists() and outputs.stat().st_size > 200_000):
        assert first.poll() is None, "finished before it could be killed: use a longer scenario"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(first.pid, signal.SIGKILL)  # reflex flow exec'd into bytewax.run: same pid
    first.wait(timeout=30)
    before = len(read_events(out / "events.jsonl"))
    assert before < len(expected), "killed too late to prove anything"

    finish(flow(out, "-s", "1"))
    got = read_events(out / "events.jsonl")
    ids = [e.event_id for e in got]
    assert len(ids) == len(set(ids)), "an event was written twice"
    assert ids == [e.event_id for e in expected], "an event was lost or changed"
    assert [e.top.entity if e.top else None for e in got] == [
        e.top.entity if e.top else None for e in expected
    ]
    # Baselines continue: the counts after the restart carry on from the snapshot, so every
    # exported baseline equals the uninterrupted run's, and none is written twice.
    resumed, straight = baseline_counts(outputs), baseline_counts(reference / "outputs.lp")
    assert resumed == straight
    assert all(len({t for t, _ in s}) == len(s) for s in resumed.values())
