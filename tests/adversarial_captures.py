"""Simulated captures, as line protocol, for the whole-flow adversarial tests
(tests/test_adversarial_*.py), and the commands that replay them as a user would.

Each capture is a scenario's first seconds, 10 s at a time; a try edits its lines. Captures
are kept per process: a simulation costs more than most replays of it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

from click.testing import CliRunner

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.shell.localize import command as localize_command
from reflex_localize.simulator import Simulation, load_scenario

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
# fault_xid79 on six nodes: GPU 3 of node-0004 (job "train") falls off the bus at 300 s.
XID79 = str(SCENARIOS / "fault_xid79_six_nodes.toml")
XID79_NODE, XID79_GPU, XID79_S = "node-0004", "3", 300
Told = tuple[str, str, str, str]  # trigger, severity, node, GPU index (or component)


@cache
def chunks(
    scenario: str, seconds: int, cluster: str = "sim", onset_s: float | None = None
) -> tuple[tuple[str, ...], ...]:
    """The scenario's lines for each 10 s of its first ``seconds`` (seed 7), under ``cluster``;
    ``onset_s``: its faults' onset moved there."""
    loaded = load_scenario(scenario)
    faults = tuple(
        fault if onset_s is None else dataclasses.replace(fault, onset_s=onset_s)
        for fault in loaded.faults
    )
    loaded = dataclasses.replace(loaded, cluster_name=cluster, faults=faults)
    out = []
    for number, chunk in enumerate(Simulation(loaded, seed=7).chunks(10.0)):
        if number * 10 >= seconds:
            break
        out.append(tuple(line for frame in chunk for line in encode_frame(frame)))
    return tuple(out)


def write(path: Path, lines: Iterable[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def edited(
    scenario: str, seconds: int, edit: Callable[[int, str], Iterable[str]] = lambda n, line: [line]
) -> list[str]:
    """The capture with ``edit(chunk number, line)`` giving each line's replacement lines."""
    return [new for n, chunk in enumerate(chunks(scenario, seconds)) for line in chunk
            for new in edit(n, line)]  # fmt: skip


def localize(replay: Path, *options: str) -> tuple[list[LocalizationEvent], dict]:
    """``reflex localize --replay FILE --json``, in this process: its events and its document."""
    result = CliRunner().invoke(
        localize_command, ["--replay", str(replay), "--json", *options], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output[-2000:]
    document = json.loads(result.stdout)
    events = [LocalizationEvent.from_json(json.dumps(e)) for e in document["events"]]
    return events, document


def told(events: list[LocalizationEvent]) -> list[Told]:
    return [
        (e.trigger, e.severity, e.top.node, e.top.index if e.top.component == "gpu" else "")
        for e in events
        if e.top is not None
    ]


def blamed_nodes(events: list[LocalizationEvent]) -> set[str]:
    """Every node an event names as a suspect."""
    return {s.node for e in events for s in e.suspects}
