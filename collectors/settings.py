"""The ``[collect]`` section of the Reflex config file, and which collectors exist.

>>> from reflex.config import section_as
>>> settings = section_as({"intervals": {"host_fs": 60}}, CollectSettings, where="[collect]")
>>> settings.interval("host_fs", 30.0), settings.interval("host", 1.0)
(60.0, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collectors.filesystems import DEFAULT_MOUNTPOINTS, LOCAL_FSTYPES

# name -> module whose ``build(identity, settings)`` makes the collector.
COLLECTOR_MODULES = {
    "host": "collectors.host",
    "host_fs": "collectors.filesystems",
    "nic": "collectors.nic",
    "kmsg": "collectors.kmsg",
    "gpu": "collectors.gpu",
}


@dataclass(frozen=True)
class CollectSettings:
    enabled: tuple[str, ...] = tuple(COLLECTOR_MODULES)
    intervals: dict[str, float] = field(default_factory=dict)
    proc_root: str = "/proc"
    sys_root: str = "/sys"
    kmsg_path: str = "/dev/kmsg"
    mountpoints: tuple[str, ...] = DEFAULT_MOUNTPOINTS
    fstypes: tuple[str, ...] = LOCAL_FSTYPES
    spool_dir: str = "/var/lib/reflex/spool"
    flush_interval_s: float = 5.0
    # Stamp points with InfluxDB's time when this node's clock is known to be off by more
    # than the tolerance (see reflex/clock_offset.py); false: measure and report only.
    clock_correction: bool = True
    clock_tolerance_s: float = 2.0

    def interval(self, collector: str, default: float) -> float:
        return float(self.intervals.get(collector, default))
