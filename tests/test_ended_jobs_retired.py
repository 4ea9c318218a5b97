"""A job that ended leaves only its name and last window in the flow's state: the flow runs for
months over thousands of jobs, and every snapshot carried each ended job's peers, baselines and
evidence (about 2 KB a rank) for good. Checked in the recovery store of a real `reflex flow`,
where a job that ended mid-capture sits beside one still running, and a job name that comes
back later (a requeued job keeps its id) is localized afresh."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from reflex_localize.flows.io.sinks import read_events
from reflex_localize.flows.judge.job_step import JobState
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.shell.recovery_keys import JOB_STEP, latest_snapshots
from reflex_localize.simulator import Simulation
from reflex_localize.simulator.scenario import parse_scenario

pytestmark = pytest.mark.slow
CLI = [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()", "flow"]

SCENARIO = """
duration_s = 420
[cluster]
nodes = 6
profiles = { "h100-sxm5-80gb" = 6 }
[[job]]
name = "ends-early"
nodes = 2
step_s = 2.0
end_s = 150
nodes_list = ["node-0001", "node-0002"]
[[job]]
name = "runs-on"
nodes = 2
step_s = 2.0
nodes_list = ["node-0003", "node-0004"]
[[job]]
name = "requeued"
nodes = 2
step_s = 2.0
end_s = 120
nodes_list = ["node-0005", "node-0006"]
[[job]]
name = "requeued"
nodes = 2
step_s = 2.0
start_s = 200
nodes_list = ["node-0005", "node-0006"]
[[fault]]
type = "xid79"
node = "node-0005"
onset_s = 330
"""


def write_capture(path: Path) -> None:
    import tomllib

    scenario = parse_scenario(tomllib.loads(SCENARIO), default_name="ended_jobs", where="test")
    chunks = Simulation(scenario, seed=7).chunks(10.0)
    path.write_text("".join(line + "\n" for c in chunks for f in c for line in encode_frame(f)))


def job_states(recovery: Path) -> dict[str, JobState]:
    return {k: pickle.loads(b) for k, b in latest_snapshots(recovery, JOB_STEP).items()}


def test_an_ended_job_keeps_only_its_name_and_a_requeued_one_starts_afresh(
    tmp_path: Path,
) -> None:
    capture, out = tmp_path / "capture.lp", tmp_path / "flow"
    write_capture(capture)
    command = [*CLI, "--source", f"file:{capture}", "--sink", "files", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]

    states = job_states(out / "recovery")
    ended, running = states["ends-early"], states["runs-on"]
    assert ended.finished and not ended.members and not ended.pending
    assert ended.last_done > 0, "the last window is kept, so a late part is told late"
    assert running.members and not running.finished
    ended_size, running_size = len(pickle.dumps(ended)), len(pickle.dumps(running))
    assert ended_size * 5 < running_size, (ended_size, running_size)

    # The requeued job ran again on the same name, after its first run was retired, and its
    # second run's XID 79 is localized from a fresh state.
    assert states["requeued"].members and not states["requeued"].finished
    events = [e for e in read_events(out / "events.jsonl") if e.job == "requeued"]
    assert [e.trigger for e in events] == ["explicit"], events
    assert events[0].top is not None and events[0].top.node == "node-0005"
