"""Site tags reach the events, and nodes degrading together under one switch blame it."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np
import pytest

from reflex_localize.flows.io.sources import MemorySource, split_windows
from reflex_localize.flows.runner import run_in_process
from reflex_localize.schemas.frame import Frame
from reflex_localize.shell.flow import site_tags_setting
from reflex_localize.simulator import Simulation, load_scenario

SCENARIO = Path(__file__).parent / "scenarios" / "two_ports_under_one_switch.toml"
WINDOW_NS = 10 * 10**9


def _with_sites(frames: list[Frame], switch_of: dict[str, str]) -> list[Frame]:
    """Every row carries its node's rack and leaf switch, as a Telegraf global tag would."""
    out = []
    for frame in frames:
        nodes = frame.tags["node"].tolist()
        tags = dict(frame.tags)
        tags["switch"] = np.array([switch_of[n] for n in nodes], dtype=object)
        tags["rack"] = np.array([f"rack-{switch_of[n][-1]}" for n in nodes], dtype=object)
        out.append(Frame(frame.measurement, frame.time_ns, tags, frame.fields))
    return out


def _run(switch_of_faulty: str) -> list:
    sim = Simulation(load_scenario(str(SCENARIO)), seed=7)
    nodes = sim.cluster.jobs[0].nodes
    faulty = {label.node for label in sim.truth}
    switch_of = {n: (switch_of_faulty if n in faulty else f"leaf-{i % 3}") for i, n in
                 enumerate(nodes)}  # fmt: skip
    frames = _with_sites([f for chunk in sim.chunks(seconds=10) for f in chunk], switch_of)
    windows = sorted(split_windows(frames, WINDOW_NS), key=lambda w: w[0])
    return run_in_process(MemorySource([(w, f) for w, f, _ in windows])).events


def test_two_nodes_under_one_switch_blame_the_switch() -> None:
    events = [e for e in _run("leaf-9") if e.top is not None]
    assert events, "two flapping ports must raise an event"
    top = events[0].top
    assert (top.node, top.component) == ("leaf-9", "switch"), events[0].summary
    assert "switch leaf-9" in events[0].action
    sim = Simulation(load_scenario(str(SCENARIO)), seed=7)
    under = {n for n, site in events[0].sites.items() if site["switch"] == "leaf-9"}
    assert under == {label.node for label in sim.truth}


def test_the_same_fault_under_two_switches_names_a_node_with_its_site() -> None:
    sim = Simulation(load_scenario(str(SCENARIO)), seed=7)
    faulty = sorted({label.node for label in sim.truth})
    # The faulty nodes on different switches: the event names a node, and gives its site.
    sim_nodes = sim.cluster.jobs[0].nodes
    switch_of = {n: f"leaf-{i}" for i, n in enumerate(sim_nodes)}
    frames = _with_sites([f for chunk in sim.chunks(seconds=10) for f in chunk], switch_of)
    windows = sorted(split_windows(frames, WINDOW_NS), key=lambda w: w[0])
    control = [e for e in run_in_process(MemorySource([(w, f) for w, f, _ in windows])).events
               if e.top is not None]  # fmt: skip
    top = control[0].top if control else None
    assert top is not None and top.node in faulty
    assert control[0].sites[top.node]["switch"] == switch_of[top.node]


def test_the_config_files_site_tags_reach_the_flows_processes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``[site] tags`` in the file and ``REFLEX_SITE_TAGS`` are merged for the workers, which
    read only the environment; a tag that is already Reflex's is refused before any process."""
    monkeypatch.setenv("REFLEX_SITE_TAGS", "row")
    assert site_tags_setting({"site": {"tags": ["pod"]}}) == "rack,switch,pod,row"
    with pytest.raises(click.UsageError, match="already a tag"):
        site_tags_setting({"site": {"tags": ["node"]}})
