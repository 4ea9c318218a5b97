"""Host CPU, memory, load, pressure stall and disk I/O, from procfs.

Sources (relative to ``proc_root``, ``/proc`` on a node):

- ``stat``: the aggregate ``cpu`` line, in jiffies; ratios are deltas between two runs, so
  the first run has none;
- ``meminfo``: ``MemTotal`` and ``MemAvailable``, in kB;
- ``loadavg``: 1/5/15-minute load and the runnable count of ``running/total``;
- ``pressure/{cpu,memory,io}``: PSI ``avg10`` percentages (kernel 4.20+ with ``psi=1``);
- ``diskstats``: whole block devices only, sectors always of 512 bytes whatever the
  device's own sector size (Documentation/admin-guide/iostats.rst).

A garbled source costs only its own fields: the parsers raise ``ValueError`` naming the bad
line, and the collector counts it per file in ``HostCollector.parse_errors``, keeps the reason
in ``last_parse_errors``, logs it (rate-limited) and emits what the other sources gave.

>>> from pathlib import Path
>>> collector = HostCollector("c1", "n1", proc_root=Path("tests/fixtures/host/proc"))
>>> sorted({p.measurement for p in collector.collect(0)})
['host', 'host_disk']
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from reflex_localize.collectors.base import base_tags, read_text, require_dir
from reflex_localize.schemas.codec import Point

if TYPE_CHECKING:
    from reflex_localize.collectors.settings import CollectSettings
    from reflex_localize.influx.config import Identity

log = logging.getLogger(__name__)

# Partitions, ram disks, loop and floppy devices, as node_exporter's diskstats collector skips.
IGNORED_DISKS = re.compile(r"^(z?ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\d+n\d+p|sr)\d+$")
DISKSTATS_SECTOR_BYTES = 512
# Every kernel since 2.6.25 writes at least 14 columns on each line, partitions included.
DISKSTATS_MIN_COLUMNS = 14
PSI_RESOURCES = ("cpu", "memory", "io")
EXCERPT_CHARS = 80  # of a garbled line in a reason: enough to recognise, too little to flood

Fields = dict[str, float | int]
T = TypeVar("T")


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


@contextmanager
def _parsing(line: str) -> Iterator[None]:
    """Turns a ValueError raised while parsing ``line`` into one that quotes the line."""
    try:
        yield
    except ValueError as error:
        excerpt = line if len(line) <= EXCERPT_CHARS else line[:EXCERPT_CHARS] + "…"
        raise ValueError(f"could not parse {excerpt!r}") from error


def parse_stat(text: str) -> CpuTimes | None:
    for line in text.splitlines():
        if line.startswith("cpu "):
            # user nice system idle iowait irq softirq steal [guest guest_nice]
            with _parsing(line):
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
        if key not in ("MemTotal", "MemAvailable"):
            continue  # the others are not read, so their garbage is not ours
        with _parsing(line):
            number, *unit = rest.split()
            values[key] = int(number) * (1024 if unit[:1] == ["kB"] else 1)
    return MemInfo(values.get("MemTotal"), values.get("MemAvailable"))


def parse_loadavg(text: str) -> LoadAvg:
    # "3.55 2.06 0.88 6/99 10979"
    with _parsing(text):
        load1, load5, load15, tasks, _ = text.split()
        return LoadAvg(float(load1), float(load5), float(load15), int(tasks.split("/")[0]))


def parse_pressure(text: str) -> Pressure:
    # "some avg10=59.04 avg60=59.37 avg300=39.15 total=189029987"
    averages: dict[str, float] = {}
    for line in text.splitlines():
        with _parsing(line):
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
        with _parsing(line):
            if len(parts) < DISKSTATS_MIN_COLUMNS:
                raise ValueError(f"{len(parts)} columns, fewer than {DISKSTATS_MIN_COLUMNS}")
            if IGNORED_DISKS.match(parts[2]):
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


def _writable(fields: Fields) -> Fields:
    """``fields``, or ValueError where InfluxDB could not store one: the agent would then drop
    the whole point, the good sources' fields with it (rules of schemas.codec.validate)."""
    for key, value in fields.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{key}={value!r} is not finite")
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            raise ValueError(f"{key}={value} does not fit a signed 64-bit int")
    return fields


def _memory_fields(text: str) -> Fields:
    memory = parse_meminfo(text)
    if memory.total_bytes is None and memory.available_bytes is None:
        raise ValueError("no MemTotal or MemAvailable line")
    fields = {"memory_total_bytes": memory.total_bytes}
    fields["memory_available_bytes"] = memory.available_bytes
    return _writable({key: value for key, value in fields.items() if value is not None})


def _load_fields(text: str) -> Fields:
    load = parse_loadavg(text)
    return _writable(
        {
            "load1": load.load1,
            "load5": load.load5,
            "load15": load.load15,
            "procs_running": load.procs_running,
        }
    )


def _pressure_fields(resource: str, text: str) -> Fields:
    pressure = parse_pressure(text)
    if pressure.some_avg10 is None:
        raise ValueError("no 'some avg10=' value")
    fields: Fields = {f"psi_{resource}_some_avg10_ratio": pressure.some_avg10}
    # System-wide cpu "full" is always zero and not declared.
    if resource != "cpu" and pressure.full_avg10 is not None:
        fields[f"psi_{resource}_full_avg10_ratio"] = pressure.full_avg10
    return _writable(fields)


def _disk_fields(text: str) -> dict[str, Fields]:
    return {
        disk.device: _writable(
            {
                "read_bytes": disk.read_bytes,
                "written_bytes": disk.written_bytes,
                "io_time_seconds": disk.io_time_seconds,
            }
        )
        for disk in parse_diskstats(text)
    }


class HostCollector:
    """Emits one ``host`` point and one ``host_disk`` point per whole disk per run.

    A garbled file costs only its own fields; it is counted by name, with its last reason:

    >>> import shutil, tempfile
    >>> proc = Path(tempfile.mkdtemp()) / "proc"
    >>> _ = shutil.copytree("tests/fixtures/host/proc", proc)
    >>> _ = (proc / "loadavg").write_text("garbage")
    >>> collector = HostCollector("c1", "n1", proc_root=proc)
    >>> host = next(p for p in collector.collect(0) if p.measurement == "host")
    >>> "memory_total_bytes" in host.fields, "load1" in host.fields
    (True, False)
    >>> collector.parse_errors
    {'loadavg': 1}
    >>> collector.last_parse_errors["loadavg"].endswith("/loadavg: could not parse 'garbage'")
    True
    >>> shutil.rmtree(proc.parent)
    """

    name = "host"

    def __init__(
        self, cluster: str, node: str, *, proc_root: Path = Path("/proc"), interval_s: float = 1.0
    ) -> None:
        self.proc_root = proc_root
        self.interval_s = interval_s
        self.parse_errors: dict[str, int] = {}  # garbled reads since start, by source file
        self.last_parse_errors: dict[str, str] = {}  # the latest reason, by source file
        self._tags = base_tags(cluster, node)
        self._previous_cpu: CpuTimes | None = None
        self._garbled_this_run: list[str] = []

    def collect(self, now_ns: int) -> Iterator[Point]:
        require_dir(self.proc_root, "proc_root")
        self._garbled_this_run = []
        host = [
            self._read("stat", self._cpu_fields),
            self._read("meminfo", _memory_fields),
            self._read("loadavg", _load_fields),
        ]
        host += [self._read(f"pressure/{r}", partial(_pressure_fields, r)) for r in PSI_RESOURCES]
        disks = self._read("diskstats", _disk_fields)
        if self._garbled_this_run and disks is None and all(part is None for part in host):
            # Nothing was read: a success with no points would hide a node whose procfs is
            # broken as a whole; raising makes the agent count a failed run (success=false).
            reasons = "; ".join(self._garbled_this_run)
            raise ValueError(f"every readable host source is garbled: {reasons}")
        fields = {key: value for part in host if part for key, value in part.items()}
        if fields:
            yield Point("host", self._tags, fields, now_ns)
        for device, disk in (disks or {}).items():
            yield Point("host_disk", {**self._tags, "device": device}, disk, now_ns)

    def _read(self, name: str, to_fields: Callable[[str], T]) -> T | None:
        """What ``to_fields`` makes of the file; None if it is absent, empty or garbled."""
        path = self.proc_root / name
        text = read_text(path)
        if not text:
            return None  # absent is not garbled: no PSI on kernels before 4.20 or without psi=1
        try:
            return to_fields(text)
        except (ValueError, OverflowError) as error:  # OverflowError: a ratio of huge counters
            self._count_garbled(name, f"{path}: {error}")
            return None

    def _count_garbled(self, name: str, reason: str) -> None:
        count = self.parse_errors[name] = self.parse_errors.get(name, 0) + 1
        self.last_parse_errors[name] = reason
        self._garbled_this_run.append(reason)
        if count <= 10 or count % 1000 == 0:  # a file that stays broken must not flood the log
            log.warning("host collector: %s (%d so far)", reason, count)

    def _cpu_fields(self, text: str) -> Fields:
        current = parse_stat(text)
        if current is None:
            raise ValueError("no 'cpu ' line")
        # A garbled sample (raised above) leaves the baseline as it was: the next ratio then
        # spans two intervals, which is still a true average.
        previous, self._previous_cpu = self._previous_cpu, current
        if previous is None or current.total <= previous.total:
            return {}
        elapsed = current.total - previous.total
        return _writable(
            {
                "cpu_busy_ratio": (current.busy - previous.busy) / elapsed,
                "cpu_iowait_ratio": (current.iowait - previous.iowait) / elapsed,
                "cpu_steal_ratio": (current.steal - previous.steal) / elapsed,
            }
        )


def build(identity: Identity, settings: CollectSettings) -> HostCollector:
    return HostCollector(
        identity.cluster,
        identity.node,
        proc_root=Path(settings.proc_root),
        interval_s=settings.interval("host", 1.0),
    )
