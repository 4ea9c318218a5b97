"""`reflex flow` killed with SIGKILL at ten random points of one run, restarted each time on
its recovery directory: the events are exactly those of an uninterrupted run, none lost and
none duplicated, and so are the exported baselines."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
from test_flow_recovery import baseline_counts, finish, flow

from reflex_localize.flows.io.sinks import read_events

pytestmark = pytest.mark.slow
KILLS = 10


def test_ten_random_kills_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    finish(flow(reference, "--no-recovery"))
    expected = read_events(reference / "events.jsonl")
    assert len(expected) >= 2

    out, rng, kills = tmp_path / "crashing", random.Random(2026), 0
    outputs = out / "outputs.lp"
    while kills < KILLS:
        process = flow(out, "-s", "1")
        # Let it run a random while past its start-up (the first output), then kill it.
        deadline = time.monotonic() + 120
        while not (outputs.exists() and outputs.stat().st_size > 0) and process.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(rng.uniform(0.2, 2.0))
        if process.poll() is not None:
            break  # it finished before this kill: the remaining restarts have nothing to do
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        kills += 1
    print(f"{kills} SIGKILLs landed in one run")
    assert kills >= 5, f"only {kills} kills landed before the run finished"
    finish(flow(out, "-s", "1"))

    got = read_events(out / "events.jsonl")
    ids = [e.event_id for e in got]
    assert len(ids) == len(set(ids)), "an event was written twice"
    assert [e.to_json() for e in got] == [e.to_json() for e in expected]
    assert baseline_counts(outputs) == baseline_counts(reference / "outputs.lp")
