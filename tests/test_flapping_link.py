"""A flapping link retrains every few tens of seconds, and the windows between two retrains
show none: its retrains back within a minute are one episode (flows/judge/job_evidence.py), so
a port that flaps from a job's first step is named while its peers still show it, before its
own history has learned the errors as its normal."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_localize.flows.judge import job_evidence
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def _named() -> list[tuple[str, str | None]]:
    source = SimulatorSource(str(SCENARIOS / "flapping_from_start_one_replica.toml"), 7, 1, 10.0)
    events = run_in_process(source).events
    return [(e.trigger, e.top.entity if e.top else None) for e in events if e.job == "train"]


def test_a_port_flapping_from_the_first_step_is_named() -> None:
    assert _named() == [("comm_straggler", "node-0003|nic|mlx5_6/1")]


def test_each_retrain_alone_never_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    # The control: with every retrain its own episode, the port is never named.
    monkeypatch.setattr(job_evidence, "FLAP_REJOIN_NS", 0)
    assert _named() == []
