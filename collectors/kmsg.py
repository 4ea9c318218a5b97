"""Kernel events (NVIDIA XID, machine checks, NIC link up/down, OOM kills) from /dev/kmsg.

Each record of ``/dev/kmsg`` is ``PRIORITY,SEQUENCE,TIMESTAMP_US,FLAGS;MESSAGE`` followed by
optional `` KEY=VALUE`` continuation lines (Documentation/ABI/testing/dev-kmsg). A plain
file in ``dmesg`` format (``[  123.456789] MESSAGE``) is read the same way, for tests and
for replaying a saved log.

The timestamp is microseconds since boot; boot time is ``btime`` in /proc/stat. Both are
fixed for the life of the kernel, so rereading the ring buffer after an agent restart gives
the same points with the same timestamps, which InfluxDB overwrites instead of duplicating.
The record's sequence number is added in nanoseconds so that two records of one microsecond
stay two points.

Reading /dev/kmsg needs CAP_SYSLOG when ``kernel.dmesg_restrict`` is 1 (the default on most
distributions).

>>> event = classify("NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, "
...                  "GPU has fallen off the bus.")
>>> event.kind, event.code, event.device
('xid', 79, '0000:3b:00')
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reflex_localize.collectors.base import HardwareAbsent, base_tags, read_text
from reflex_localize.schemas.codec import Point

if TYPE_CHECKING:
    from reflex_localize.collectors.settings import CollectSettings
    from reflex_localize.influx.config import Identity

KMSG_RECORD_BYTES = 8192  # a read shorter than the record fails with EINVAL

# NVIDIA driver: "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., name=..., GPU has fallen off the bus."
XID = re.compile(r"NVRM: Xid \(PCI:(?P<device>[0-9a-fA-F:.]+)\): (?P<code>\d+)")
# x86 MCE: "mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 5: be00000000800400"
MCE_BANK = re.compile(r"mce: \[Hardware Error\]: CPU (?P<cpu>\d+): .*Bank (?P<code>\d+):")
MCE_LOGGED = re.compile(r"mce: \[Hardware Error\]: Machine check events logged")
# "mlx5_core 0000:17:00.0 ens1f0np0: Link down", "ib0: Link is Down",
# "i40e 0000:3b:00.0 eno1: NIC Link is Up, 25 Gbps Full Duplex, Flow Control: None"
LINK = re.compile(r"(?P<device>[\w.-]+): (?:NIC )?Link (?:is )?(?P<state>up|down)\b", re.I)
# "e1000e: eth0 NIC Link is Down"
LINK_DRIVER_FIRST = re.compile(r"^\w+: (?P<device>[\w.-]+) NIC Link is (?P<state>Up|Down)\b")
# "Out of memory: Killed process 4242 (python3) total-vm:..." and the memory-cgroup variant
OOM = re.compile(r"[Oo]ut of memory: Killed process (?P<pid>\d+) \((?P<name>[^)]*)\)")

KMSG_HEADER = re.compile(r"^(?P<priority>\d+),(?P<sequence>\d+),(?P<usec>\d+),[^;]*;(?P<msg>.*)")
DMESG_LINE = re.compile(r"^\[\s*(?P<seconds>\d+)\.(?P<micros>\d{1,6})\]\s?(?P<msg>.*)")


@dataclass(frozen=True)
class KernelRecord:
    """One log record; ``usec`` since boot is None for a line without a timestamp."""

    sequence: int | None
    usec: int | None
    message: str


@dataclass(frozen=True)
class KernelEvent:
    kind: str
    message: str
    code: int | None = None
    device: str | None = None


def parse_record(text: str) -> KernelRecord | None:
    """A /dev/kmsg record or a dmesg line; continuation lines (" KEY=VALUE") give None."""
    first = text.split("\n", 1)[0]
    if not first or first.startswith(" "):
        return None
    match = KMSG_HEADER.match(first)
    if match:
        return KernelRecord(int(match["sequence"]), int(match["usec"]), match["msg"].strip())
    match = DMESG_LINE.match(first)
    if match:
        usec = int(match["seconds"]) * 1_000_000 + int(match["micros"].ljust(6, "0"))
        return KernelRecord(None, usec, match["msg"].strip())
    return KernelRecord(None, None, first.strip())


def classify(message: str) -> KernelEvent | None:
    """The event a kernel message reports, or None for the many that report none."""
    if match := XID.search(message):
        return KernelEvent("xid", message, int(match["code"]), match["device"])
    if match := MCE_BANK.search(message):
        return KernelEvent("mce", message, int(match["code"]), f"cpu{match['cpu']}")
    if MCE_LOGGED.search(message):
        return KernelEvent("mce", message)
    if match := OOM.search(message):
        return KernelEvent("oom_kill", message, device=match["name"])
    if (match := LINK_DRIVER_FIRST.search(message)) or (match := LINK.search(message)):
        return KernelEvent(f"link_{match['state'].lower()}", message, device=match["device"])
    return None


def boot_time_ns(proc_root: Path) -> int | None:
    for line in (read_text(proc_root / "stat") or "").splitlines():
        if line.startswith("btime "):
            return int(line.split()[1]) * 1_000_000_000
    return None


class KernelLogSource:
    """New records of /dev/kmsg (non-blocking) or of a growing file, since the last read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.overwritten = 0  # records the kernel overwrote before we read them
        self._fd: int | None = None
        self._offset = 0

    def read_new(self) -> Iterator[str]:
        try:
            is_device = stat.S_ISCHR(os.stat(self.path).st_mode)
        except FileNotFoundError:
            raise HardwareAbsent(f"{self.path} does not exist") from None
        if is_device:
            yield from self._read_device()
        else:
            yield from self._read_file()

    def _read_device(self) -> Iterator[str]:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        while True:
            try:
                chunk = os.read(self._fd, KMSG_RECORD_BYTES)
            except BlockingIOError:
                return
            except OSError as error:
                if error.errno != errno.EPIPE:
                    raise
                self.overwritten += 1  # the next read resumes at the oldest record left
                continue
            if not chunk:
                return
            yield chunk.decode("utf-8", "replace")

    def _read_file(self) -> Iterator[str]:
        with self.path.open("rb") as handle:
            if os.fstat(handle.fileno()).st_size < self._offset:
                self._offset = 0  # truncated or rotated
            handle.seek(self._offset)
            for raw in handle:
                if not raw.endswith(b"\n"):
                    break  # a line still being written; read it next time
                self._offset += len(raw)
                yield raw.decode("utf-8", "replace")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class KmsgCollector:
    """Emits one ``event`` point (source=kernel) per XID, MCE, link change or OOM kill."""

    name = "kmsg"

    def __init__(
        self,
        cluster: str,
        node: str,
        *,
        path: Path = Path("/dev/kmsg"),
        proc_root: Path = Path("/proc"),
        interval_s: float = 1.0,
    ) -> None:
        self.interval_s = interval_s
        self.source = KernelLogSource(path)
        self._proc_root = proc_root
        self._tags = {**base_tags(cluster, node), "source": "kernel"}

    def collect(self, now_ns: int) -> Iterator[Point]:
        boot_ns = boot_time_ns(self._proc_root)
        for text in self.source.read_new():
            record = parse_record(text)
            event = classify(record.message) if record else None
            if record is None or event is None:
                continue
            yield self._point(record, event, boot_ns, now_ns)

    def _point(
        self, record: KernelRecord, event: KernelEvent, boot_ns: int | None, now_ns: int
    ) -> Point:
        time_ns = now_ns
        if boot_ns is not None and record.usec is not None:
            time_ns = boot_ns + record.usec * 1000 + (record.sequence or 0) % 1000
        fields: dict[str, int | str] = {"message": event.message}
        if event.code is not None:
            fields["code"] = event.code
        if event.device is not None:
            fields["device"] = event.device
        return Point("event", {**self._tags, "kind": event.kind}, fields, time_ns)

    def close(self) -> None:
        self.source.close()


def build(identity: Identity, settings: CollectSettings) -> KmsgCollector:
    return KmsgCollector(
        identity.cluster,
        identity.node,
        path=Path(settings.kmsg_path),
        proc_root=Path(settings.proc_root),
        interval_s=settings.interval("kmsg", 1.0),
    )
