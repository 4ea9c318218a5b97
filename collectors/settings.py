"""The ``[collect]`` section of the Reflex config file, and which collectors exist.

>>> from reflex_localize.influx.config import section_as
>>> settings = section_as({"intervals": {"host_fs": 60}}, CollectSettings, where="[collect]")
>>> settings.interval("host_fs", 30.0), settings.interval("host", 1.0)
(60.0, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reflex_localize.collectors.hook_socket import DEFAULT_HOOK_SOCKET

# Which filesystems the host_fs collector watches, unless the config says otherwise.
DEFAULT_MOUNTPOINTS = ("/", "/var", "/tmp", "/home", "/scratch", "/raid", "/data", "/local")
LOCAL_FSTYPES = ("ext4", "ext3", "xfs", "btrfs", "zfs", "f2fs", "tmpfs", "overlay")

# The collectors that exist, in the order they run (collectors/registry.py builds them).
COLLECTOR_NAMES = ("host", "host_fs", "nic", "kmsg", "gpu", "topology", "hook")


@dataclass(frozen=True)
class CollectSettings:
    enabled: tuple[str, ...] = COLLECTOR_NAMES
    intervals: dict[str, float] = field(default_factory=dict)
    proc_root: str = "/proc"
    sys_root: str = "/sys"
    kmsg_path: str = "/dev/kmsg"
    mountpoints: tuple[str, ...] = DEFAULT_MOUNTPOINTS
    fstypes: tuple[str, ...] = LOCAL_FSTYPES
    spool_dir: str = "/var/lib/reflex/spool"
    flush_interval_s: float = 5.0
    # Stamp points with InfluxDB's time when this node's clock is known to be off by more
    # than the tolerance (see influx/clock_offset.py); false: measure and report only.
    clock_correction: bool = True
    clock_tolerance_s: float = 2.0
    # Where training hooks on this node send their records (collectors/hook_receiver.py);
    # REFLEX_HOOK_SOCKET overrides it for the agent and the hook alike.
    hook_socket: str = DEFAULT_HOOK_SOCKET
    # Also listen on TCP at host:port (the node's own address), for pods that cannot mount the
    # socket; REFLEX_HOOK_ADDRESS overrides it for the agent and the hook alike. "": no TCP.
    hook_address: str = ""

    def interval(self, collector: str, default: float) -> float:
        return float(self.intervals.get(collector, default))
