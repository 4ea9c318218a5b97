"""Host collectors against checked-in /proc files captured on a real machine."""

from __future__ import annotations

import os
import shutil
from collections import namedtuple
from pathlib import Path

from reflex_localize.collectors.base import FixedClock
from reflex_localize.collectors.filesystems import FilesystemCollector, parse_mounts
from reflex_localize.collectors.host import (
    HostCollector,
    parse_diskstats,
    parse_loadavg,
    parse_meminfo,
    parse_pressure,
    parse_stat,
)
from reflex_localize.schemas.codec import encode

FIXTURES = Path(__file__).parent / "fixtures"
GOLDEN = Path(__file__).parent / "golden"
T0 = 1_700_000_000_000_000_000
Vfs = namedtuple("Vfs", "f_frsize f_blocks f_bavail")


def check_golden(name: str, lines: list[str]) -> None:
    """Compares with tests/golden/NAME; REFLEX_UPDATE_GOLDEN=1 rewrites it (review the diff)."""
    path = GOLDEN / name
    text = "".join(line + "\n" for line in lines)
    if os.environ.get("REFLEX_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs from the golden file; review, then update"


def test_parsers_read_the_captured_files() -> None:
    proc = FIXTURES / "host" / "proc"
    cpu = parse_stat((proc / "stat").read_text())
    assert cpu is not None and cpu.total == 58544 + 6380 + 23953 + 365 + 123 + 109
    assert cpu.busy == cpu.total - 23953 - 365
    memory = parse_meminfo((proc / "meminfo").read_text())
    assert memory.total_bytes == 24684092 * 1024
    assert memory.available_bytes is not None and memory.available_bytes < memory.total_bytes
    load = parse_loadavg((proc / "loadavg").read_text())
    assert load.procs_running >= 1
    psi = parse_pressure((proc / "pressure" / "cpu").read_text())
    assert psi.some_avg10 is not None and 0 <= psi.some_avg10 <= 1
    disks = parse_diskstats((proc / "diskstats").read_text())
    assert [d.device for d in disks] == ["vda"], "loop and zram devices are skipped"


def test_meminfo_without_memavailable_leaves_it_absent() -> None:
    memory = parse_meminfo("MemTotal:       1024 kB\nMemFree:         512 kB\n")
    assert memory.available_bytes is None and memory.total_bytes == 1024 * 1024


def test_pressure_without_full_line() -> None:
    assert parse_pressure("some avg10=1.50 avg60=0.00 avg300=0.00 total=10").full_avg10 is None


def test_mount_escapes() -> None:
    (mount,) = parse_mounts("/dev/sdb1 /mnt/my\\040disk ext4 rw 0 0\n")
    assert mount.mountpoint == "/mnt/my disk"


def test_first_run_has_no_cpu_ratio_second_has_deltas() -> None:
    collector = HostCollector("c1", "n1", proc_root=FIXTURES / "host" / "proc")
    first = next(p for p in collector.collect(T0) if p.measurement == "host")
    assert "cpu_busy_ratio" not in first.fields
    collector.proc_root = FIXTURES / "host-1s-later" / "proc"
    second = next(p for p in collector.collect(T0 + 10**9) if p.measurement == "host")
    busy = second.fields["cpu_busy_ratio"]
    assert isinstance(busy, float) and 0.0 <= busy <= 1.0


def test_no_psi_no_psi_fields(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "host" / "proc", tmp_path / "proc")
    shutil.rmtree(tmp_path / "proc" / "pressure")
    (point, *_) = HostCollector("c1", "n1", proc_root=tmp_path / "proc").collect(T0)
    assert not any(key.startswith("psi_") for key in point.fields)


def test_filesystems_only_present_local_mounts() -> None:
    asked = []

    def statvfs(path: str) -> Vfs:
        asked.append(path)
        return Vfs(4096, 66_053_021, 19_937_649)

    collector = FilesystemCollector(
        "c1", "n1", proc_root=FIXTURES / "host" / "proc", statvfs=statvfs
    )
    points = list(collector.collect(T0))
    assert asked == ["/"], "only mounted, local filesystems are statvfs'd"
    assert points[0].tags["mountpoint"] == "/"


def test_golden_host_line_protocol() -> None:
    clock = FixedClock(T0)
    host = HostCollector("c1", "fixture-node", proc_root=FIXTURES / "host" / "proc")
    filesystems = FilesystemCollector(
        "c1",
        "fixture-node",
        proc_root=FIXTURES / "host" / "proc",
        statvfs=lambda path: Vfs(4096, 66_053_021, 19_937_649),
    )
    lines = [encode(p) for p in host.collect(clock.time_ns())]
    clock.advance(1.0)
    host.proc_root = FIXTURES / "host-1s-later" / "proc"
    lines += [encode(p) for p in host.collect(clock.time_ns())]
    lines += [encode(p) for p in filesystems.collect(clock.time_ns())]
    check_golden("host.lp", lines)
