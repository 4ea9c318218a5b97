"""The static-threshold baseline: per-metric rules in the style of DCGM health checks and
per-metric alert rules. Reflex is evaluated against it; it is not part of Reflex's verdicts."""

from __future__ import annotations

import numpy as np

from reflex_localize.flows.incidents.events import (
    Evidence,
    LocalizationEvent,
    Suspect,
    event_id,
    recommend_action,
)
from reflex_localize.flows.messages import ExplicitEvent
from reflex_localize.flows.signals.derive import SIGNAL_INDEX
from reflex_localize.schemas.hardware_profiles import load_profiles

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


def threshold_events(
    job: str,
    cluster: str,
    cooldown_s: float,
    alerted: dict[str, int],
    window: int,
    end_ns: int,
    entities: np.ndarray,
    values: np.ndarray,
    profiles: np.ndarray,
    events: list[ExplicitEvent],
) -> list[tuple[str, object]]:
    """Static rules alert per entity, each time a rule breaks outside its cooldown
    (``alerted`` remembers the last alert per entity)."""
    hits = threshold_hits(entities, values, profiles) if len(entities) else []
    # An application error, or hardware error only the training process reports, is no rule.
    hits += [
        (e.entity, f"{e.kind}:{e.code}")
        for e in events
        if e.severity not in ("application", "reported")
    ]
    out: list[tuple[str, object]] = []
    for entity, signal in hits:
        last = alerted.get(entity)
        if last is not None and end_ns - last < cooldown_s * 1e9:
            continue
        alerted[entity] = end_ns
        node, component, index = entity.split("|")
        suspect = Suspect(node, component, index, 1.0, [Evidence(signal, None, None, 1.0, end_ns)])
        out.append(
            (
                "event",
                LocalizationEvent(
                    event_id(job, "threshold", window, entity),
                    end_ns,
                    cluster,
                    job,
                    "threshold",
                    "warning",
                    1.0,
                    [suspect],
                    recommend_action(component, signal),
                    f"{signal} on {entity}",
                ),
            )
        )
    return out
