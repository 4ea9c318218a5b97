"""A link below what it is capable of under load is told once as a warning of its part."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from reflex_localize.flows.judge.degraded_links import HOLD_WINDOWS, DegradedLinks
from reflex_localize.flows.judge.job_fields import JobConfig
from reflex_localize.flows.runner import run_in_process
from reflex_localize.flows.signals.derive import SIGNAL_NAMES
from reflex_localize.shell.simulated_source import SimulatorSource

SCENARIOS = Path(__file__).resolve().parent / "scenarios"

GPU = "n1|gpu|3"
PORT = "n1|nic|mlx5_2/1"
MGMT = "n1|nic|eno1"


def _window(links: DegradedLinks, cells: dict[str, dict[str, float]], busy: bool = True):
    entities = np.array(list(cells), dtype=object)
    values = np.full((len(cells), len(SIGNAL_NAMES)), np.nan)
    for row, signals in enumerate(cells.values()):
        for name, value in signals.items():
            values[row, SIGNAL_NAMES.index(name)] = value
    return links.observe(entities, values, {"n1"} if busy else set(), 0)


def test_a_gpu_link_at_half_width_under_load_is_told_once_and_again_after_it_recovers():
    links = DegradedLinks()
    assert not _window(links, {GPU: {"pcie_downgrade": 0.0}})  # at full width under load
    told = [_window(links, {GPU: {"pcie_downgrade": 1.0}}) for _ in range(2 * HOLD_WINDOWS)]
    assert [len(t) for t in told] == [0, 0, 1, 0, 0, 0]
    event = told[HOLD_WINDOWS - 1][0]
    assert (event.node, event.component, event.index, event.severity) == ("n1", "gpu", "3",
                                                                            "warning")  # fmt: skip
    assert event.kind == "pcie_downtrained"
    _window(links, {GPU: {"pcie_downgrade": 0.0}})
    again = [_window(links, {GPU: {"pcie_downgrade": 0.8}}) for _ in range(HOLD_WINDOWS)]
    assert [len(t) for t in again] == [0, 0, 1]


def test_a_link_never_seen_at_full_width_under_load_is_the_fleets_normal():
    """A platform whose GPU links all train narrower than they report runs that way from the
    start, on every node: no change, nothing to tell."""
    links = DegradedLinks()
    assert not any(_window(links, {GPU: {"pcie_downgrade": 1.0}}) for _ in range(10))


def test_an_idle_node_or_a_brief_retrain_is_not_told():
    links = DegradedLinks()
    idle = [_window(links, {GPU: {"pcie_downgrade": 0.0}}, busy=False)]
    idle += [_window(links, {GPU: {"pcie_downgrade": 1.0}}, busy=False) for _ in range(5)]
    assert not any(idle)
    assert not _window(links, {GPU: {"pcie_downgrade": 0.0}})
    flicker = [0.2, 1.0, 1.0, 0.0, 1.0, 1.0, 0.4, 1.0]  # never HOLD_WINDOWS mostly below in a row
    assert not any(_window(links, {GPU: {"pcie_downgrade": v}}) for v in flicker)


def test_a_port_that_falls_from_400_to_200_gbps_is_told_but_not_one_that_always_ran_slower():
    links = DegradedLinks()
    rates = [400.0] * 3 + [0.0] * 2 + [200.0] * HOLD_WINDOWS  # down a while (its link events)
    told = [
        _window(links, {PORT: {"nic_rate_low": r}, MGMT: {"nic_rate_low": 25.0}}) for r in rates
    ]
    flat = [e for t in told for e in t]
    assert [(e.index, e.kind) for e in flat] == [("mlx5_2/1", "port_rate_low")]
    assert len(told[-1]) == 1  # on the HOLD_WINDOWS-th window at the lower rate


def test_the_change_backs_the_warning_on_a_fleet_whose_naming_bar_is_high() -> None:
    """A fleet's noisy background raises the score that names a part (the alarm budget's
    tail); a link's change is told at once, not when the GPU's score has caught up with it."""
    source = SimulatorSource(str(SCENARIOS / "pcie_width_only.toml"), 7, 1, 10.0)
    config = JobConfig(min_suspect_score=50.0)
    events = run_in_process(source, window_seconds=10.0, job_config=config).events
    told = [(e.trigger, e.severity, e.top.node, e.top.index) for e in events if e.top]
    assert told == [("explicit", "warning", "node-0004", "3")]
    assert events[0].time_ns - events[0].suspects[0].evidence[0].since_ns < 60e9
