"""Each GPU's clock in the jobs it served: the drift rule's memory across jobs.

A part can degrade between two jobs (a power-delivery part, a chassis fan) and come back into
the next job already slow. In that job the rank has no history of its own to drift from, and
its peers cannot tell it from the fleet's binned GPUs (healthy GPUs of one SKU differ by 8%,
Sinha et al., SC22). The job it served before can: the shard that owns the node keeps, per
GPU, the SM clock it held in windows with no clock reason at all, and when the job ends, their
median becomes the GPU's "clock in its last job". A GPU with no reason bit set runs at the
clock it is allowed (NVML's "clocks event reasons": none means not held back), whatever the
workload, so one job's clock can be held against another's. Windows at the power cap are left
out for the same reason: there the clock depends on what the job computes.

>>> clocks = BusyClocks()
>>> for window in range(20):
...     clocks.observe("a", {"n1|gpu|0": 1950.0 if window % 10 else 490.0})  # a checkpoint
>>> clocks.end("a")
>>> clocks.of_nodes({"n1"})
{'n1|gpu|0': (1950.0, 'a')}
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass, field

import numpy as np

from reflex_localize.flows.signals.derive import SIGNAL_NAMES
from reflex_localize.flows.state_upgrade import FieldsFilledOnRestore

KEEP_WINDOWS = 64  # a job's latest windows per GPU (bounded memory)
MIN_WINDOWS = 12  # a job shorter than this on the GPU leaves its last job's clock in place
BUSY_SHARE = 0.9  # of the GPU's highest window: lower ones idled part of the window
_CLOCK = SIGNAL_NAMES.index("sm_clock_low")  # its raw value: the window's mean MHz
_REASONS = [
    SIGNAL_NAMES.index(name)
    for name in (
        "throttle_thermal",
        "throttle_power",
        "throttle_hw_slowdown",
        "throttle_sw_power_cap",
    )
]


def window_clocks(
    jobs_on_node: dict[str, set[str]], entities: np.ndarray, values: np.ndarray
) -> dict[str, dict[str, float]]:
    """Job -> GPU entity -> its mean clock this window, for the GPUs with no clock reason in
    the window whose node serves exactly one job (two jobs on one node share its GPUs)."""
    out: dict[str, dict[str, float]] = {}
    if not len(entities):
        return out
    free = ~np.nan_to_num(values[:, _REASONS]).any(axis=1)
    clock = values[:, _CLOCK]
    usable = free & np.isfinite(clock) & (clock > 0)
    for entity, mhz in zip(entities[usable].tolist(), clock[usable].tolist(), strict=True):
        node, component = _node_and_component(entity)
        jobs = jobs_on_node.get(node)
        if component == "gpu" and jobs is not None and len(jobs) == 1:
            (job,) = jobs
            out.setdefault(job, {})[entity] = mhz
    return out


@functools.lru_cache(maxsize=65_536)
def _node_and_component(entity: str) -> tuple[str, str]:
    """Every window parses the same entities (a cache: this runs on the shard's hot path)."""
    node, component, _ = entity.split("|", 2)
    return node, component


def busy_median(clocks: list[float]) -> float:
    """The median clock of the windows the GPU computed through: a checkpoint's or a data
    stall's idle windows (a quarter of the clock) must not pull it down.

    >>> busy_median([1950.0, 1940.0, 490.0, 1960.0, 1200.0])
    1950.0
    """
    if not clocks:
        return 0.0
    top = max(clocks)
    return statistics.median([c for c in clocks if c >= BUSY_SHARE * top])


@dataclass
class BusyClocks(FieldsFilledOnRestore):
    """Per shard: the running jobs' clocks, and each GPU's clock in the last job it served."""

    current: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # job -> GPU -> MHz
    past: dict[str, tuple[float, str]] = field(default_factory=dict)  # GPU -> (MHz, job)

    def observe(self, job: str, clocks: dict[str, float]) -> None:
        """One window of one job: the clock of each of its GPUs that had no reason bit set."""
        kept = self.current.setdefault(job, {})
        for entity, clock in clocks.items():
            values = kept.get(entity)
            if values is None:
                values = kept[entity] = []
            values.append(clock)
            if len(values) > KEEP_WINDOWS:
                del values[0]

    def end(self, job: str) -> None:
        """The job ended: what its GPUs held becomes their clock in their last job."""
        for entity, values in self.current.pop(job, {}).items():
            if len(values) >= MIN_WINDOWS:
                self.past[entity] = (busy_median(values), job)

    def of_nodes(self, nodes: set[str]) -> dict[str, tuple[float, str]]:
        """GPU entity -> (its clock in its last job, that job) for these nodes' GPUs. A job
        requeued under its own name gets its earlier run's: a job still running has none."""
        return {
            entity: kept for entity, kept in self.past.items() if entity.split("|", 1)[0] in nodes
        }
