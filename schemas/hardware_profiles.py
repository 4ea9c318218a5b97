"""Hardware profiles: what differs per GPU model (limits, ranges, signals, XIDs, weights).

A node is judged by the profile of its own hardware, so a mixed fleet compares like with like.

>>> profile = load_profiles()["h100-sxm5-80gb"]
>>> profile.nvlink_count, profile.xid(79).severity
(18, 'critical')
>>> profile_for_gpu_name("NVIDIA H100 80GB HBM3").name
'h100-sxm5-80gb'
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path

_DIR = Path(__file__).parent / "hardware"
SEVERITIES = ("application", "warning", "critical")


@dataclass(frozen=True)
class XidInfo:
    code: int
    meaning: str
    severity: str
    component: str
    action: str


UNKNOWN_XID = XidInfo(-1, "XID not in the profile's table", "warning", "gpu", "look it up")


@dataclass(frozen=True)
class HardwareProfile:
    name: str
    vendor: str
    architecture: str
    match: tuple[str, ...]
    nvlink_count: int
    memory_total_bytes: int
    signals: dict[str, bool]
    limits: dict[str, float]
    ranges: dict[str, tuple[float, float]]
    weights: dict[str, float]
    xids: dict[int, XidInfo]
    # What the model's readings can physically be, per gpu field (schemas/ranges.py); narrower
    # than the schema's plausible range, far wider than ``ranges`` (what is normal).
    plausible: dict[str, tuple[float, float]] = field(default_factory=dict)

    def xid(self, code: int) -> XidInfo:
        return self.xids.get(code, XidInfo(code, *_unknown_rest()))

    def has(self, signal: str) -> bool:
        return self.signals.get(signal, False)


def _unknown_rest() -> tuple[str, str, str, str]:
    return UNKNOWN_XID.meaning, UNKNOWN_XID.severity, UNKNOWN_XID.component, UNKNOWN_XID.action


def _xid_table(name: str, directory: Path) -> dict[int, XidInfo]:
    raw = tomllib.loads((directory / f"{name}.toml").read_text())["xid"]
    table = {}
    for code, entry in raw.items():
        if entry["severity"] not in SEVERITIES:
            raise ValueError(f"{name}.toml: XID {code} has unknown severity {entry['severity']!r}")
        table[int(code)] = XidInfo(
            int(code), entry["meaning"], entry["severity"], entry["component"], entry["action"]
        )
    return table


def _profile(path: Path) -> HardwareProfile:
    raw = tomllib.loads(path.read_text())
    if raw["name"] != path.stem:
        raise ValueError(f"{path.name}: name {raw['name']!r} differs from the file name")
    return HardwareProfile(
        name=raw["name"],
        vendor=raw["vendor"],
        architecture=raw["architecture"],
        match=tuple(raw["match"]),
        nvlink_count=int(raw["nvlink_count"]),
        memory_total_bytes=int(raw["memory_total_bytes"]),
        signals={key: bool(value) for key, value in raw["signals"].items()},
        limits={key: float(value) for key, value in raw["limits"].items()},
        ranges={key: (float(low), float(high)) for key, (low, high) in raw["ranges"].items()},
        weights={key: float(value) for key, value in raw["weights"].items()},
        xids=_xid_table(raw["xid_table"], path.parent),
        plausible={
            key: (float(low), float(high)) for key, (low, high) in raw.get("plausible", {}).items()
        },
    )


@cache
def load_profiles(directory: Path = _DIR) -> dict[str, HardwareProfile]:
    """Every profile in ``schemas/hardware``, by name (shared tables like XIDs are skipped)."""
    profiles = {}
    for path in sorted(directory.glob("*.toml")):
        if "name" in tomllib.loads(path.read_text()):
            profiles[path.stem] = _profile(path)
    return profiles


@lru_cache(maxsize=1024)  # called per foreign GPU point; a fleet has a handful of names
def profile_for_gpu_name(gpu_name: str) -> HardwareProfile | None:
    """The profile whose match strings occur in an NVML device name, or None if unknown."""
    for profile in load_profiles().values():
        if any(pattern in gpu_name for pattern in profile.match):
            return profile
    return None


@cache
def generic_xids(directory: Path = _DIR) -> dict[int, XidInfo]:
    """NVIDIA's XID table, for a GPU whose model no profile names (a hook that did not say,
    a node without the agent): an XID 79 is critical whatever the GPU.

    >>> generic_xids()[79].severity
    'critical'
    """
    return _xid_table("nvidia-xid", directory)
