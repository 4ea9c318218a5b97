"""A crash's consequences are not new faults. Ranks stuck in a collective with a dead or lost
rank spin until their NCCL watchdog kills them (10 minutes by default), one by one; each exit
idles its GPUs, whose clocks then fall far below their peers' and their own busy history.

Before, once the watchdogs fired, the cascade was judged on its own: with the critical error
(or the crash's "no hardware fault") told ten minutes earlier, the idle GPUs of the first
ranks to exit led "explicit" warnings (two after a GPU fell off the bus, three after a
software crash), and the job's lack of progress a hang. An independent test bed's fleet showed
the same: its NCCL timeouts, ten minutes after a GPU fell off the bus, named a node whose
eight GPUs had just idled."""

from __future__ import annotations

from pathlib import Path

from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.simulated_source import SimulatorSource

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def _told(name: str) -> list[tuple[str, str, tuple[str, str, str] | None]]:
    events = run_in_process(SimulatorSource(str(SCENARIOS / f"{name}.toml"), 7, 1, 10.0)).events
    return [
        (e.trigger, e.severity, (e.top.node, e.top.component, e.top.index) if e.top else None)
        for e in events
    ]


def test_the_watchdogs_cascade_after_a_lost_gpu_is_that_incident() -> None:
    assert _told("xid79_slow_watchdog") == [("explicit", "critical", ("node-0004", "gpu", "3"))]


def test_a_software_crash_is_told_once_and_its_idle_gpus_are_never_blamed() -> None:
    assert _told("software_crash_slow_watchdog") == [("explicit", "info", None)]
