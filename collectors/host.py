"""Host CPU, memory, load, pressure stall and disk I/O, from procfs.

Sources (relative to ``proc_root``, ``/proc`` on a node):

- ``stat``: the aggregate ``cpu`` line, in jiffies; ratios are deltas between two runs, so
  the first run has none;
- ``meminfo``: ``MemTotal`` and ``MemAvailable``, in kB;
- ``loadavg``: 1/5/15-minute load and the runnable count of ``running/total``;
- ``pressure/{cpu,memory,io}``: PSI ``avg10`` percentages (kernel 4.20+ with ``psi=1``);
- ``diskstats``: whole block devices only, sectors always of 512 bytes whatever the
  device's own sector size (Documentation/admin-guide/iostats.rst).

>>> from pathlib import Path
>>> collector = HostCollector("c1", "n1", proc_root=Path("tests/fixtures/host/proc"))
>>> sorted({p.measurement for p in collector.collect(0)})
['host', 'host_disk']
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from collectors.base import base_tags, read_text
from schemas.codec import Point

if TYPE_CHECKING:
    from collectors.settings import CollectSettings
    from reflex.config import Identity

# Partitions, ram disks, loop and floppy devices, as node_exporter's diskstats collector skips.
IGNORED_DISKS = re.compile(r"^(z?ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\d+n\d+p|sr)\d+$")
DISKSTATS_SECTOR_BYTES = 512


@dataclass(frozen=True)
class CpuTimes:
    """Jiffies from the ``cpu`` line of /proc/stat (guest time is already inside user/nice)."""

    busy: int
    iowait: int
    steal: int
    total: int


@dataclass(frozen=True)
class MemInfo:
    total_bytes: int | None
    available_bytes: int | None


@dataclass(frozen=True)
class LoadAvg:
    load1: float
    load5: float
    load15: float
    procs_running: int


@dataclass(frozen=True)
class Pressure:
    """PSI averages over 10 s as ratios; ``full`` is None where the kernel has no such line."""

    some_avg10: float | None
    full_avg10: float | None


@dataclass(frozen=True)
class DiskStats:
    device: str
    read_bytes: int
    written_bytes: int
    io_time_seconds: float


def parse_stat(text: str) -> CpuTimes | None:
    for line in text.splitlines():
        if line.startswith("cpu "):
            # user nice system idle iowait irq softirq steal [guest guest_nice]
            values = [int(v) for v in line.split()[1:9]]
            values += [0] * (8 - len(values))
            idle, iowait, steal = values[3], values[4], values[7]
            total = sum(values)
            return CpuTimes(busy=total - idle - iowait, iowait=iowait, steal=steal, total=total)
    return None


def parse_meminfo(text: str) -> MemInfo:
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            scale = 1024 if len(parts) > 1 and parts[1] == "kB" else 1
            values[key] = int(parts[0]) * scale
    return MemInfo(values.get("MemTotal"), values.get("MemAvailable"))


def parse_loadavg(text: str) -> LoadAvg:
    # "3.55 2.06 0.88 6/99 10979"
    load1, load5, load15, tasks, _ = text.split()
    return LoadAvg(float(load1), float(load5), float(load15), int(tasks.split("/")[0]))


def parse_pressure(text: str) -> Pressure:
    # "some avg10=59.04 avg60=59.37 avg300=39.15 total=189029987"
    averages: dict[str, float] = {}
    for line in text.splitlines():
        kind, *pairs = line.split()
        for pair in pairs:
            key, _, value = pair.partition("=")
            if key == "avg10":
                averages[kind] = float(value) / 100.0
    return Pressure(averages.get("some"), averages.get("full"))


def parse_diskstats(text: str) -> list[DiskStats]:
    disks = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 14 or IGNORED_DISKS.match(parts[2]):
            continue
        # 3 name, 6 sectors read, 10 sectors written, 13 ms spent doing I/O (1-based columns)
        disks.append(
            DiskStats(
                device=parts[2],
                read_bytes=int(parts[5]) * DISKSTATS_SECTOR_BYTES,
                written_bytes=int(parts[9]) * DISKSTATS_SECTOR_BYTES,
                io_time_seconds=int(parts[12]) / 1000.0,
            )
        )
    return disks


class HostCollector:
    """Emits one ``host`` point and one ``host_disk`` point per whole disk per run."""

    name = "host"

    def __init__(
        self, cluster: str, node: str, *, proc_root: Path = Path("/proc"), interval_s: float = 1.0
    ) -> None:
        self.proc_root = proc_root
        self.interval_s = interval_s
        self._tags = base_tags(cluster, node)
        self._previous_cpu: CpuTimes | None = None

    def collect(self, now_ns: int) -> Iterator[Point]:
        fields = {**self._cpu_fields(), **self._memory_fields(), **self._load_fields()}
        fields.update(self._pressure_fields())
        if fields:
            yield Point("host", self._tags, fields, now_ns)
        text = read_text(self.proc_root / "diskstats")
        for disk in parse_diskstats(text or ""):
            yield Point(
                "host_disk",
                {**self._tags, "device": disk.device},
                {
                    "read_bytes": disk.read_bytes,
                    "written_bytes": disk.written_bytes,
                    "io_time_seconds": disk.io_time_seconds,
                },
                now_ns,
            )

    def _cpu_fields(self) -> dict[str, float]:
        text = read_text(self.proc_root / "stat")
        current = parse_stat(text) if text else None
        previous, self._previous_cpu = self._previous_cpu, current
        if current is None or previous is None or current.total <= previous.total:
            return {}
        elapsed = current.total - previous.total
        return {
            "cpu_busy_ratio": (current.busy - previous.busy) / elapsed,
            "cpu_iowait_ratio": (current.iowait - previous.iowait) / elapsed,
            "cpu_steal_ratio": (current.steal - previous.steal) / elapsed,
        }

    def _memory_fields(self) -> dict[str, int]:
        text = read_text(self.proc_root / "meminfo")
        if text is None:
            return {}
        memory = parse_meminfo(text)
        fields = {"memory_total_bytes": memory.total_bytes}
        fields["memory_available_bytes"] = memory.available_bytes
        return {key: value for key, value in fields.items() if value is not None}

    def _load_fields(self) -> dict[str, float | int]:
        text = read_text(self.proc_root / "loadavg")
        if not text:
            return {}
        load = parse_loadavg(text)
        return {
            "load1": load.load1,
            "load5": load.load5,
            "load15": load.load15,
            "procs_running": load.procs_running,
        }

    def _pressure_fields(self) -> dict[str, float]:
        fields: dict[str, float | None] = {}
        for resource in ("cpu", "memory", "io"):
            text = read_text(self.proc_root / "pressure" / resource)
            if not text:
                continue  # no PSI: kernel older than 4.20 or booted without psi=1
            pressure = parse_pressure(text)
            fields[f"psi_{resource}_some_avg10_ratio"] = pressure.some_avg10
            if resource != "cpu":  # system-wide cpu "full" is always zero, not declared
                fields[f"psi_{resource}_full_avg10_ratio"] = pressure.full_avg10
        return {key: value for key, value in fields.items() if value is not None}


def build(identity: Identity, settings: CollectSettings) -> HostCollector:
    return HostCollector(
        identity.cluster,
        identity.node,
        proc_root=Path(settings.proc_root),
        interval_s=settings.interval("host", 1.0),
    )
