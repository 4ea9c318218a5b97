"""Kernel event parsing against real XID, MCE, link and OOM line formats."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reflex_localize.collectors.kmsg import KmsgCollector, classify, parse_record

FIXTURES = Path(__file__).parent / "fixtures" / "kmsg"
BTIME_NS = 1795964206 * 1_000_000_000

CASES = [
    (
        "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, "
        "GPU has fallen off the bus.",
        ("xid", 79, "0000:3b:00"),
    ),
    ("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", ("xid", 79, "0000:3b:00")),
    (
        "NVRM: Xid (PCI:0000:18:00): 13, pid=4070, name=python, Graphics SM Warp Exception on "
        "(GPC 0, TPC 0, SM 0): Out Of Range Address",
        ("xid", 13, "0000:18:00"),
    ),
    ("mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 5: be00000000800400", ("mce", 5, "cpu3")),
    (
        "mce: [Hardware Error]: CPU 0: Machine Check Exception: 5 Bank 4: b200000000070f0f",
        ("mce", 4, "cpu0"),
    ),
    ("mce: [Hardware Error]: Machine check events logged", ("mce", None, None)),
    ("mlx5_core 0000:17:00.0 ens1f0np0: Link down", ("link_down", None, "ens1f0np0")),
    ("mlx5_core 0000:17:00.0 ens1f0np0: Link up", ("link_up", None, "ens1f0np0")),
    ("ib0: Link is Down", ("link_down", None, "ib0")),
    (
        "i40e 0000:3b:00.0 eno1: NIC Link is Up, 25 Gbps Full Duplex, Flow Control: None",
        ("link_up", None, "eno1"),
    ),
    ("e1000e: eth0 NIC Link is Down", ("link_down", None, "eth0")),
    (
        "Out of memory: Killed process 48213 (python3) total-vm:113254012kB, anon-rss:98211532kB, "
        "file-rss:0kB, shmem-rss:12kB, UID:1000 pgtables:194332kB oom_score_adj:0",
        ("oom_kill", None, "python3"),
    ),
    (
        "Memory cgroup out of memory: Killed process 4242 (pt_main_thread) total-vm:9184kB",
        ("oom_kill", None, "pt_main_thread"),
    ),
]


@pytest.mark.parametrize(("message", "expected"), CASES)
def test_classify_real_formats(message: str, expected: tuple) -> None:
    event = classify(message)
    assert event is not None
    assert (event.kind, event.code, event.device) == expected
    assert event.message == message


@pytest.mark.parametrize(
    "message",
    [
        "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
        "mce: [Hardware Error]: TSC 0 ADDR fef1ba40 MISC 3805000086",
        "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready",
        "oom_reaper: reaped process 48213 (python3), now anon-rss:0kB",
        "EXT4-fs (vda): mounted filesystem with ordered data mode.",
    ],
)
def test_other_messages_are_not_events(message: str) -> None:
    assert classify(message) is None


def test_record_formats() -> None:
    record = parse_record("4,1710,1902331872,-;NVRM: Xid (PCI:0000:3b:00): 79, x\n SUBSYSTEM=pci\n")
    assert record is not None
    assert (record.sequence, record.usec) == (1710, 1902331872)
    assert record.message == "NVRM: Xid (PCI:0000:3b:00): 79, x"
    dmesg = parse_record("[ 1843.2219] ib0: Link is Down")
    assert dmesg is not None and dmesg.usec == 1843_221900 and dmesg.sequence is None
    assert parse_record(" DEVICE=+pci:0000:17:00.0") is None


def test_kmsg_file_gives_events_with_boot_relative_times() -> None:
    collector = KmsgCollector("c1", "n1", path=FIXTURES / "kmsg.txt", proc_root=FIXTURES / "proc")
    points = list(collector.collect(0))
    kinds = [p.tags["kind"] for p in points]
    assert kinds == [
        "link_down", "link_up", "xid", "xid", "xid", "mce", "mce",
        "link_down", "link_up", "oom_kill",
    ]  # fmt: skip
    xid79 = points[2]
    assert xid79.tags == {"cluster": "c1", "node": "n1", "source": "kernel", "kind": "xid"}
    assert xid79.fields["code"] == 79 and xid79.fields["device"] == "0000:3b:00"
    assert xid79.time_ns == BTIME_NS + 1902331872 * 1000 + 1710 % 1000
    assert list(collector.collect(0)) == [], "a second read gives only new records"


def test_file_is_tailed(tmp_path: Path) -> None:
    log = tmp_path / "dmesg.txt"
    log.write_text("[    1.000000] ib0: Link is Down\n[    2.0")  # second line half-written
    collector = KmsgCollector("c1", "n1", path=log, proc_root=FIXTURES / "proc")
    assert [p.tags["kind"] for p in collector.collect(0)] == ["link_down"]
    with log.open("a") as handle:
        handle.write("00000] ib0: Link is Up\n")
    assert [p.tags["kind"] for p in collector.collect(0)] == ["link_up"]


def test_dmesg_file() -> None:
    collector = KmsgCollector("c1", "n1", path=FIXTURES / "dmesg.txt", proc_root=FIXTURES / "proc")
    codes = [(p.tags["kind"], p.fields.get("code")) for p in collector.collect(0)]
    assert codes == [
        ("link_down", None), ("xid", 79), ("xid", 13), ("mce", 4), ("link_down", None),
        ("oom_kill", None),
    ]  # fmt: skip


@pytest.mark.skipif(not os.access("/dev/kmsg", os.R_OK), reason="/dev/kmsg not readable here")
def test_live_dev_kmsg_reads_without_blocking() -> None:
    collector = KmsgCollector("c1", "n1")
    try:
        list(collector.collect(0))
        list(collector.collect(0))  # the second read finds nothing new and returns at once
        assert collector.source.overwritten >= 0
    finally:
        collector.close()
