"""A critical error is never held back by an earlier event: not by one that named the same node,
not by a second critical error of another part in the same window. Only a repeat of the same
part's critical error within the cooldown is. A training process's word alone is not critical.

Before, a fail-slow GPU told as a straggler muted an XID 79 of another GPU of its node minutes
later (nothing was written anywhere), and the second of two GPUs lost in one window was lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from xid79_capture import xid79_chunks

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.judge.job_fields import JobConfig
from reflex_localize.flows.judge.job_step import JobState
from reflex_localize.flows.messages import ExplicitEvent
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
Told = tuple[str, str, tuple[str, str, str]]


def _told(events: list[LocalizationEvent]) -> list[Told]:
    return [
        (e.trigger, e.severity, (e.top.node, e.top.component, e.top.index))
        for e in events
        if e.top is not None
    ]


def _scenario(name: str) -> list[Told]:
    source = SimulatorSource(str(SCENARIOS / f"{name}.toml"), 7, 1, 10.0)
    return _told(run_in_process(source).events)


def test_an_xid_on_a_node_an_event_already_named_gets_its_own_event() -> None:
    assert _scenario("slow_gpu_then_xid_same_node") == [
        ("straggler", "warning", ("node-0002", "gpu", "1")),
        ("explicit", "critical", ("node-0002", "gpu", "3")),
    ]


def test_two_gpus_lost_in_one_window_get_an_event_each() -> None:
    assert _scenario("two_gpus_lost_at_once") == [
        ("explicit", "critical", ("node-0003", "gpu", "2")),
        ("explicit", "critical", ("node-0006", "gpu", "5")),
    ]


def _replay(tmp_path: Path, lines: list[str]) -> list[Told]:
    path = tmp_path / "capture.lp"
    path.write_text("".join(line + "\n" for line in lines))
    return _told(run_in_process(LineProtocolSource(path, 1, 10.0)).events)


@pytest.mark.parametrize("source", ["nvml", "training"])
def test_an_xid_only_the_training_process_reports_is_not_critical(
    tmp_path: Path, source: str
) -> None:
    lines = [
        line.replace("source=nvml", f"source={source}") if line.startswith("event,") else line
        for chunk in xid79_chunks(360)
        for line in chunk
        if "kind=gpu_lost" not in line  # the driver's own word, which the hook cannot send
    ]
    critical = [t for t in _replay(tmp_path, lines) if t[1] == "critical"]
    if source == "nvml":
        assert critical == [("explicit", "critical", ("node-0006", "gpu", "3"))]
    else:
        assert critical == []


def test_a_gpu_named_by_bus_id_and_by_index_is_one_finding_two_gpus_by_index_are_two() -> None:
    """Without gpu_info the kernel log's XID 79 names the GPU by bus id and NVML's "GPU lost"
    by index: one GPU, told once. Two GPUs both named by index are two parts."""

    def error(index: str, kind: str) -> ExplicitEvent:
        return ExplicitEvent(0, "n1", kind, 79, "gpu", index, "critical", kind, "")

    job = JobState("j", JobConfig())
    assert not job._critical_repeats(error("0000:ab:00", "xid"), 10**10)
    assert job._critical_repeats(error("5", "gpu_lost"), 2 * 10**10)
    other = JobState("j", JobConfig())
    assert not other._critical_repeats(error("5", "xid"), 10**10)
    assert not other._critical_repeats(error("3", "xid"), 10**10)
    assert other._critical_repeats(error("3", "gpu_lost"), 2 * 10**10)
