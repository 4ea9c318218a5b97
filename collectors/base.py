"""What every collector shares: the ``Collector`` protocol, the clock and "hardware absent".

A collector has a ``name``, an ``interval_s`` and a ``collect(now_ns)`` that yields schema
points. It raises :class:`HardwareAbsent` when the thing it reads does not exist on this node
(no NVIDIA driver, no /sys/class/infiniband): the agent records that as a successful, empty run,
not as a failure.

>>> from reflex_localize.collectors.base import FixedClock, base_tags
>>> clock = FixedClock(1_700_000_000_000_000_000)
>>> clock.time_ns(), base_tags("c1", "n1")
(1700000000000000000, {'cluster': 'c1', 'node': 'n1'})
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from reflex_localize.schemas.codec import Point

Emit = Callable[[list[Point]], None]


class HardwareAbsent(Exception):
    """What the collector reads does not exist here; the run counts as a success."""


@runtime_checkable
class Collector(Protocol):
    name: str
    interval_s: float

    def collect(self, now_ns: int) -> Iterable[Point]: ...


@runtime_checkable
class BackgroundCollector(Protocol):
    """A collector that also runs a thread of its own (the NVML XID watcher)."""

    def start_background(self, emit: Emit) -> None: ...

    def stop_background(self) -> None: ...


class Clock(Protocol):
    def time_ns(self) -> int: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """Wall time for timestamps, the monotonic clock for scheduling and durations."""

    def time_ns(self) -> int:
        return time.time_ns()

    def monotonic(self) -> float:
        return time.monotonic()


@dataclass
class FixedClock:
    """A clock that moves only when told: for tests and golden files."""

    now_ns: int
    mono: float = 0.0

    def time_ns(self) -> int:
        return self.now_ns

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.now_ns += round(seconds * 1e9)
        self.mono += seconds


class SourceMissing(FileNotFoundError):
    """A configured source root (``proc_root``, ``sys_root``) does not exist: a wrong path,
    counted as a failed run, unlike :class:`HardwareAbsent`."""


def require_dir(path: Path, setting: str) -> None:
    """Raises SourceMissing unless ``path`` (the value of ``setting``) is a directory."""
    if not path.is_dir():
        raise SourceMissing(f"{setting} {path} is not a directory")


def base_tags(cluster: str, node: str) -> dict[str, str]:
    return {"cluster": cluster, "node": node}


def read_text(path: Path) -> str | None:
    """A sysfs/procfs file's content stripped, or None when it is absent or unreadable.

    sysfs answers EINVAL for some attributes that exist but have no value (``speed`` of a
    down or virtual link), which is "absent" too. Bytes that are not UTF-8 (a buggy driver's
    attribute) become U+FFFD, so one bad attribute spoils its own value, not the whole run.
    """
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def read_int(path: Path) -> int | None:
    text = read_text(path)
    if not text:
        return None
    try:
        return int(text, 0) if text.startswith("0x") else int(text)
    except ValueError:
        return None
