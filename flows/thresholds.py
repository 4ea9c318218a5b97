"""The static-threshold baseline: per-metric rules in the style of DCGM health checks and
per-metric alert rules. Reflex is evaluated against it; it is not part of Reflex's verdicts."""

from __future__ import annotations

import numpy as np

from flows.signals import SIGNAL_INDEX
from schemas.hardware_profiles import load_profiles

# signal -> fixed limit on its window value (rates per second, fractions 0-1).
FIXED_LIMITS = {
    "throttle_thermal": 0.0,
    "throttle_power": 0.0,
    "throttle_hw_slowdown": 0.0,
    "ecc_uncorrected": 0.0,
    "remap_pending": 0.0,
    "pcie_replay_rate": 0.13,  # ~8 replays a minute
    "pcie_downgrade": 0.0,
    "nvlink_down": 0.0,
    "nvlink_error_rate": 0.1,
    "nic_symbol_error_rate": 0.1,
    "nic_link_recovery_rate": 0.0,
    "nic_link_down": 0.0,
    "nic_rcv_error_rate": 0.1,
    "nic_pause_rate": 1000.0,
    "host_cpu_pressure": 0.5,
    "host_memory_pressure": 0.2,
    "host_io_pressure": 0.3,
}


def threshold_hits(
    entities: np.ndarray, values: np.ndarray, profiles: np.ndarray
) -> list[tuple[str, str]]:
    """``(entity, signal)`` for every rule a window value breaks."""
    hits: list[tuple[str, str]] = []
    for signal, limit in FIXED_LIMITS.items():
        column = values[:, SIGNAL_INDEX[signal]]
        broken = np.flatnonzero(np.nan_to_num(column, nan=-np.inf) > limit)
        hits.extend((str(entities[i]), signal) for i in broken.tolist())
    known = load_profiles()
    temperature = values[:, SIGNAL_INDEX["temperature_high"]]
    clock = values[:, SIGNAL_INDEX["sm_clock_low"]]
    for row, profile_name in enumerate(profiles.tolist()):
        profile = known.get(profile_name)
        if profile is None:
            continue
        if temperature[row] > profile.limits["temperature_slowdown_celsius"] - 5:
            hits.append((str(entities[row]), "temperature_high"))
        if clock[row] < 0.85 * profile.limits["sm_clock_max_mhz"]:
            hits.append((str(entities[row]), "sm_clock_low"))
    return sorted(set(hits))
