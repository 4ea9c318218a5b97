"""How full the important filesystems are: ``/proc/mounts`` for which exist, ``statvfs`` for size.

Only the mountpoints asked for are measured, and only on local filesystem types by default:
``statvfs`` on a hung NFS or Lustre mount blocks in the kernel, and it would block the agent
with it. Network filesystems are measured only when their type is listed in ``fstypes``.

>>> from pathlib import Path
>>> from collections import namedtuple
>>> Vfs = namedtuple("Vfs", "f_frsize f_blocks f_bavail")
>>> collector = FilesystemCollector("c1", "n1", proc_root=Path("tests/fixtures/host/proc"),
...     mountpoints=("/",), statvfs=lambda path: Vfs(4096, 1000, 250))
>>> [p.fields["used_ratio"] for p in collector.collect(0)]
[0.75]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reflex_localize.collectors.base import base_tags, read_text, require_dir
from reflex_localize.collectors.settings import (
    DEFAULT_MOUNTPOINTS,
    LOCAL_FSTYPES,
    CollectSettings,
)
from reflex_localize.schemas.codec import Point

if TYPE_CHECKING:
    from reflex_localize.influx.config import Identity


@dataclass(frozen=True)
class Mount:
    device: str
    mountpoint: str
    fstype: str


@dataclass(frozen=True)
class FilesystemUsage:
    mountpoint: str
    size_bytes: int
    available_bytes: int

    @property
    def used_ratio(self) -> float | None:
        return None if self.size_bytes == 0 else 1.0 - self.available_bytes / self.size_bytes


def _unescape_mount_field(text: str) -> str:
    # /proc/mounts writes space, tab, newline and backslash as octal escapes (\040 ...).
    return (
        text.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
    )


def parse_mounts(text: str) -> list[Mount]:
    mounts = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            mounts.append(Mount(parts[0], _unescape_mount_field(parts[1]), parts[2]))
    return mounts


def usage_from_statvfs(mountpoint: str, result: Any) -> FilesystemUsage:
    # f_frsize is the unit of f_blocks and f_bavail; f_bsize is only the preferred I/O size.
    return FilesystemUsage(
        mountpoint, result.f_blocks * result.f_frsize, result.f_bavail * result.f_frsize
    )


class FilesystemCollector:
    """Emits one ``host_fs`` point per present, measured mountpoint."""

    name = "host_fs"

    def __init__(
        self,
        cluster: str,
        node: str,
        *,
        proc_root: Path = Path("/proc"),
        mountpoints: tuple[str, ...] = DEFAULT_MOUNTPOINTS,
        fstypes: tuple[str, ...] = LOCAL_FSTYPES,
        statvfs: Callable[[str], Any] = os.statvfs,
        interval_s: float = 30.0,
    ) -> None:
        self.proc_root = proc_root
        self.mountpoints = mountpoints
        self.fstypes = fstypes
        self.statvfs = statvfs
        self.interval_s = interval_s
        self._tags = base_tags(cluster, node)

    def collect(self, now_ns: int) -> Iterator[Point]:
        require_dir(self.proc_root, "proc_root")
        mounts = parse_mounts(read_text(self.proc_root / "mounts") or "")
        # The last mount on a mountpoint is the visible one.
        visible = {mount.mountpoint: mount for mount in mounts}
        for mountpoint in self.mountpoints:
            mount = visible.get(mountpoint)
            if mount is None or mount.fstype not in self.fstypes:
                continue
            usage = usage_from_statvfs(mountpoint, self.statvfs(mountpoint))
            fields: dict[str, int | float] = {
                "size_bytes": usage.size_bytes,
                "available_bytes": usage.available_bytes,
            }
            if usage.used_ratio is not None:
                fields["used_ratio"] = usage.used_ratio
            yield Point("host_fs", {**self._tags, "mountpoint": mountpoint}, fields, now_ns)


def build(identity: Identity, settings: CollectSettings) -> FilesystemCollector:
    return FilesystemCollector(
        identity.cluster,
        identity.node,
        proc_root=Path(settings.proc_root),
        mountpoints=settings.mountpoints,
        fstypes=settings.fstypes,
        interval_s=settings.interval("host_fs", 30.0),
    )
