"""A really full spool disk (ENOSPC on a 256 KiB tmpfs, far below the spool's own byte
bound): the writer says so, keeps the newest points, counts what it dropped, and raises
nothing into its caller."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from reflex_localize.influx.spool import Spool
from reflex_localize.influx.writer import Writer
from reflex_localize.schemas.codec import Point, decode

START_NS = 1_700_000_000_000_000_000


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mountpoint)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", str(mountpoint)], check=False)


def points(count: int) -> list[Point]:
    return [
        Point("host", {"cluster": "c", "node": "n"}, {"load1": float(i)}, START_NS + i)
        for i in range(count)
    ]


def test_disk_full_keeps_the_newest_and_counts_the_rest(
    tiny_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Nothing listens on port 9: every batch goes to the spool, which the disk cannot hold.
    writer = Writer(
        "http://127.0.0.1:9",
        "token",
        "org",
        "bucket",
        tiny_disk / "spool",
        batch_size=500,
        max_spool_bytes=1 << 30,
        timeout_s=0.2,
    )
    total = 20_000
    with caplog.at_level(logging.ERROR):
        for start in range(0, total, 1000):
            writer.write(points(total)[start : start + 1000])
            writer.flush(wait_s=0.0)
    dropped = writer.stats.dropped_spool_full
    writer.close(wait_s=0.0)
    assert "spool disk full" in caplog.text
    kept = Spool(tiny_disk / "spool")
    lines = []
    while (segment := kept.oldest()) is not None:
        lines += segment.lines
        kept.remove(segment)
    values = [decode(line).fields["load1"] for line in lines]
    print(f"disk full: {dropped} dropped (counted), {len(values)} newest kept")
    assert 0 < dropped < total and len(values) + dropped == total
    assert values == sorted(values) and values[-1] == total - 1, "the newest must be kept"
