"""A hang with no hardware suspect says how long the job stalled and which patience ran out, so
an SRE can tell a stuck collective from a long checkpoint the job had not taken before (the
soak's one false event, seed 411, was a job of 25 s steps whose first unmarked 45 s checkpoint
stalled it 90 s against a patience of 81 s)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

TOLD = r"no step for (\d+) s \(patience (\d+) s: 3 of its (\d+) s steps\)"
# A job of 25 s steps whose first checkpoint, 2 minutes long and not marked by the hook, comes
# before it has paused for anything longer than a step.
SCENARIO = """
duration_s = 600
[cluster]
nodes = 2
profiles = { "h100-sxm5-80gb" = 2 }
[[job]]
name = "long-steps"
nodes = 2
step_s = 25.0
checkpoint_every_s = 300
checkpoint_s = 120
"""


def test_a_hang_with_no_suspect_says_how_long_and_against_what_patience(tmp_path: Path) -> None:
    path = tmp_path / "long_steps.toml"
    path.write_text(SCENARIO)
    events = run_in_process(SimulatorSource(str(path), 7, 1, 10.0)).events
    hangs = [e for e in events if e.trigger == "hang"]
    assert len(hangs) == 1, [e.summary for e in events]
    [hang] = hangs
    assert hang.top is None and hang.severity == "info"
    told = re.search(
        r"no step for (\d+) s \(patience (\d+) s: 3 of its (\d+) s steps\)", hang.summary
    )
    assert told is not None, hang.summary
    stalled, patience, step = (int(g) for g in told.groups())
    assert 25 <= step <= 30 and patience == pytest.approx(3 * step, abs=1) and stalled >= patience
    assert "checkpoint longer than any the job came back from" in hang.action
