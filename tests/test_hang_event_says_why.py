"""A stalled job is a hang only when it is not writing a checkpoint, and a hang with no hardware
suspect says how long the job stalled and which patience ran out.

The soak's one false event (seed 411) was a job of 25 s steps whose first unmarked 45 s
checkpoint stalled it 90 s against a patience of 81 s. During a checkpoint every GPU of the job
idles while its hosts write; a stuck collective keeps the waiting GPUs spinning
(flows/signals/job_pause.py). Where the agent sends no GPU utilization (a job with the training hook
only) the stall cannot be told apart and the hang fires, saying what it measured."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

TOLD = r"no step for (\d+) s(?:, (\d+) s of it writing a checkpoint)? \(patience (\d+) s: (.*)\)"


def long_steps_scenario(
    checkpoint_s: float, duration_s: int = 600, hook_only: bool = False, host_disk: bool = False
) -> str:
    """A job of 25 s steps whose first checkpoint, not marked by the hook, comes before it has
    paused for anything longer than a step."""
    return f"""
duration_s = {duration_s}
[cluster]
nodes = 2
profiles = {{ "h100-sxm5-80gb" = 2 }}
[telemetry]
agent_down = {'["all"]' if hook_only else "[]"}
host_disk = {str(host_disk).lower()}
[[job]]
name = "long-steps"
nodes = 2
step_s = 25.0
checkpoint_every_s = 300
checkpoint_s = {checkpoint_s}
"""


def _hangs(tmp_path: Path, scenario: str, shards: int = 1) -> list:
    path = tmp_path / "long_steps.toml"
    path.write_text(scenario)
    events = run_in_process(SimulatorSource(str(path), 7, shards, 10.0)).events
    return [e for e in events if e.trigger == "hang"]


@pytest.mark.parametrize("shards", [1, 3], ids=["one-shard", "a-node-a-shard"])
def test_a_checkpoint_the_job_writes_is_not_a_hang(tmp_path: Path, shards: int) -> None:
    """With 3 shards the job's two nodes land on two of them (crc32): each shard's part says
    how long its own GPUs idled while writing, and the job credits what every part saw."""
    assert _hangs(tmp_path, long_steps_scenario(120.0), shards) == []


def test_without_gpu_utilization_the_stall_is_a_hang_that_says_why(tmp_path: Path) -> None:
    hangs = _hangs(tmp_path, long_steps_scenario(120.0, hook_only=True))
    assert len(hangs) == 1, [e.summary for e in hangs]
    [hang] = hangs
    assert hang.top is None and hang.severity == "info"
    told = re.search(TOLD, hang.summary)
    assert told is not None, hang.summary
    stalled, writing, patience, why = told.groups()
    assert writing is None, hang.summary  # nothing known of writes: none credited
    step = int(re.fullmatch(r"3 of its (\d+) s steps", why).group(1))  # type: ignore[union-attr]
    assert 25 <= step <= 30 and int(patience) == pytest.approx(3 * step, abs=1)
    assert int(stalled) >= int(patience)
    assert "checkpoint longer than any the job came back from" in hang.action


def test_a_checkpoint_past_the_writing_cap_is_a_hang(tmp_path: Path) -> None:
    """Storage that crawls: the job writes one checkpoint for 35 minutes."""
    hangs = _hangs(tmp_path, long_steps_scenario(2100.0, duration_s=2400))
    assert len(hangs) == 1, [e.summary for e in hangs]
    told = re.search(TOLD, hangs[0].summary)
    assert told is not None, hangs[0].summary
    stalled, writing, patience, _ = told.groups()
    assert writing is not None and int(writing) == 1800, hangs[0].summary
    assert int(stalled) - 1800 >= int(patience)
