"""A real Bytewax cluster: `reflex flow -p 2`, and two `-i/-a` processes as two hosts would
run them, find the same localization events as one process over the same data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from xid79_capture import xid79_chunks

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.io.sinks import read_events
from reflex_localize.influx.local_server import free_port

pytestmark = pytest.mark.slow
CLI = [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()", "flow"]
SOURCE = "sim:fault_xid79:7"


def flow(out: Path, *extra: str, source: str = SOURCE) -> subprocess.Popen[bytes]:
    command = [*CLI, "--source", source, "--sink", "files", "--out", str(out), "--no-recovery"]
    return subprocess.Popen([*command, *extra], stderr=subprocess.PIPE)


def finish(*processes: subprocess.Popen[bytes]) -> None:
    for process in processes:
        _, stderr = process.communicate(timeout=170)
        assert process.returncode == 0, stderr.decode()[-2000:]


def identity(events: list[LocalizationEvent]) -> list[str]:
    """The whole event: suspects, evidence, scores and wording. The job step waits for every
    shard that runs one of the job's ranks, so process timing cannot change any of it."""
    return [e.to_json() for e in events]


def test_two_processes_find_the_events_of_one(tmp_path: Path) -> None:
    finish(flow(tmp_path / "one"))
    finish(flow(tmp_path / "two", "-p", "2"))
    one = read_events(tmp_path / "one" / "events.jsonl")
    assert one, "the XID 79 must be localized"
    assert identity(read_events(tmp_path / "two" / "events.jsonl")) == identity(one)


def test_a_cluster_of_processes_addressed_like_hosts(tmp_path: Path) -> None:
    addresses = f"127.0.0.1:{free_port()};127.0.0.1:{free_port()}"
    out = tmp_path / "cluster"
    hosts = [flow(out, "-i", str(i), "-a", addresses, "-w", "1") for i in range(2)]
    finish(*hosts)
    finish(flow(tmp_path / "one"))
    expected = identity(read_events(tmp_path / "one" / "events.jsonl"))
    assert identity(read_events(out / "events.jsonl")) == expected


def test_two_processes_replaying_a_file_find_the_events_of_one(tmp_path: Path) -> None:
    """Each process decodes only its shard's lines of the capture (flows/io/sources.py)."""
    capture = tmp_path / "capture.lp"
    capture.write_text("".join(line + "\n" for chunk in xid79_chunks(360) for line in chunk))
    finish(flow(tmp_path / "one", source=f"file:{capture}"))
    finish(flow(tmp_path / "two", "-p", "2", source=f"file:{capture}"))
    one = read_events(tmp_path / "one" / "events.jsonl")
    assert one, "the XID 79 must be localized"
    assert identity(read_events(tmp_path / "two" / "events.jsonl")) == identity(one)


def test_two_processes_carry_a_gpus_clock_from_one_job_to_the_next(tmp_path: Path) -> None:
    """A GPU's clock in its last job lives in the shard that owns its node
    (flows/judge/busy_clocks.py): with two processes the next job's drift is told the same."""
    scenario = Path(__file__).parents[1] / "simulator/scenarios/families/memory_matters"
    source = f"sim:{scenario / 'gpu_drift_from_job_b_start_2s.toml'}:7"
    finish(flow(tmp_path / "one", source=source))
    finish(flow(tmp_path / "two", "-p", "2", source=source))
    one = read_events(tmp_path / "one" / "events.jsonl")
    drifts = [e for e in one if "below what it held in job a" in e.summary]
    assert [(e.top.node, e.top.index) for e in drifts if e.top] == [("node-0002", "2")]
    assert identity(read_events(tmp_path / "two" / "events.jsonl")) == identity(one)
