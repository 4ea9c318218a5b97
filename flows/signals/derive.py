"""Derived signals: raw telemetry of one window turned into one value per entity and signal.

Counters become reset-aware rates, bitmasks become indicator fractions, gauges become window
means. Everything works on whole frames with numpy (entity codes + ``np.bincount``); no Python
loop runs per point. An entity is ``node|component|index``: ``node-7|gpu|3``,
``node-7|nic|mlx5_0/1``, ``node-7|host|-``.

>>> SIGNALS["sm_clock_low"].direction
-1
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import repeat

import numpy as np

from reflex_localize.schemas.frame import Frame
from reflex_localize.schemas.hardware_profiles import load_profiles

# Clocks-event reason bits (nvmlDeviceGetCurrentClocksEventReasons).
HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, POWER_BRAKE = 0x8, 0x20, 0x40, 0x80
SW_POWER_CAP = 0x4  # the GPU holds itself at its power limit: normal under load, judged by peers
IB_PORT_ACTIVE = 4


@dataclass(frozen=True)
class SignalDef:
    """How one derived signal is computed, and which side of its baseline is bad.

    ``floor`` is the smallest spread the signal's deviation is measured in: error counters sit
    at zero with no variance, and one error must not look like an infinite deviation.
    """

    name: str
    measurement: str
    component: str
    fields: tuple[str, ...]
    reduce: str  # mean | rate | bits | below | not_equal | below_profile | below_limit | ratio
    direction: int  # +1: higher is worse; -1: lower is worse
    floor: float
    bits: int = 0
    constant: float = 0.0
    profile_limit: str = ""  # below_profile: a profile attribute; below_limit: a [limits] key


_DEFS = [
    SignalDef("temperature_high", "gpu", "gpu", ("temperature_celsius",), "mean", 1, 1.5),
    SignalDef("sm_clock_low", "gpu", "gpu", ("sm_clock_mhz",), "mean", -1, 25.0),
    SignalDef("power_low", "gpu", "gpu", ("power_watts",), "mean", -1, 30.0),
    SignalDef(
        "throttle_thermal",
        "gpu",
        "gpu",
        ("clocks_event_reasons",),
        "bits",
        1,
        0.1,
        bits=SW_THERMAL | HW_THERMAL,
    ),
    SignalDef(
        "throttle_power", "gpu", "gpu", ("clocks_event_reasons",), "bits", 1, 0.1, bits=POWER_BRAKE
    ),
    SignalDef(
        "throttle_hw_slowdown",
        "gpu",
        "gpu",
        ("clocks_event_reasons",),
        "bits",
        1,
        0.1,
        bits=HW_SLOWDOWN,
    ),
    SignalDef("ecc_corrected_rate", "gpu", "gpu", ("ecc_corrected_volatile",), "rate", 1, 0.2),
    SignalDef("ecc_uncorrected", "gpu", "gpu", ("ecc_uncorrected_volatile",), "rate", 1, 0.02),
    SignalDef("remap_pending", "gpu", "gpu", ("remapped_rows_pending",), "mean", 1, 0.1),
    SignalDef("pcie_replay_rate", "gpu", "gpu", ("pcie_replay_errors",), "rate", 1, 0.2),
    SignalDef(
        "pcie_downgrade", "gpu", "gpu", ("pcie_link_width", "pcie_link_width_max"), "below", 1, 0.1
    ),
    SignalDef(
        "nvlink_down",
        "gpu",
        "gpu",
        ("nvlink_active_links",),
        "below_profile",
        1,
        0.1,
        profile_limit="nvlink_count",
    ),
    SignalDef(
        "nvlink_error_rate",
        "gpu_nvlink",
        "gpu",
        ("crc_flit_errors", "crc_data_errors", "replay_errors", "recovery_errors"),
        "rate",
        1,
        0.2,
    ),
    SignalDef("nic_symbol_error_rate", "ib_port", "nic", ("symbol_error",), "rate", 1, 0.2),
    SignalDef(
        "nic_link_recovery_rate", "ib_port", "nic", ("link_error_recovery",), "rate", 1, 0.02
    ),
    SignalDef(
        "nic_link_down", "ib_port", "nic", ("state",), "not_equal", 1, 0.1, constant=IB_PORT_ACTIVE
    ),
    SignalDef("nic_rcv_error_rate", "ib_port", "nic", ("port_rcv_errors",), "rate", 1, 0.2),
    SignalDef("nic_xmit_wait_rate", "ib_port", "nic", ("port_xmit_wait",), "rate", 1, 1000.0),
    SignalDef(
        "nic_pause_rate",
        "ib_port",
        "nic",
        ("pfc_rx_pause_frames", "pfc_tx_pause_frames"),
        "rate",
        1,
        5.0,
    ),
    SignalDef("host_cpu_pressure", "host", "host", ("psi_cpu_some_avg10_ratio",), "mean", 1, 0.03),
    SignalDef(
        "host_memory_pressure", "host", "host", ("psi_memory_some_avg10_ratio",), "mean", 1, 0.03
    ),
    SignalDef("host_io_pressure", "host", "host", ("psi_io_some_avg10_ratio",), "mean", 1, 0.03),
    # Fields no signal read before the audit (see flows/signals/audit.py for every field).
    SignalDef(
        "throttle_sw_power_cap",
        "gpu",
        "gpu",
        ("clocks_event_reasons",),
        "bits",
        1,
        0.1,
        bits=SW_POWER_CAP,
    ),
    SignalDef(
        "power_limit_low",
        "gpu",
        "gpu",
        ("power_limit_watts",),
        "below_limit",
        1,
        0.1,
        profile_limit="power_limit_watts",
    ),
    SignalDef(
        "memory_clock_low",
        "gpu",
        "gpu",
        ("memory_clock_mhz", "memory_clock_max_mhz"),
        "ratio",
        -1,
        0.01,
    ),
    SignalDef(
        "memory_temperature_high", "gpu", "gpu", ("memory_temperature_celsius",), "mean", 1, 1.5
    ),
    SignalDef("remap_failure", "gpu", "gpu", ("remapped_rows_failure",), "mean", 1, 0.1),
    SignalDef("retired_pages_pending", "gpu", "gpu", ("retired_pages_pending",), "mean", 1, 0.1),
    SignalDef(
        "pcie_gen_low", "gpu", "gpu", ("pcie_link_gen", "pcie_link_gen_max"), "below", 1, 0.1
    ),
    SignalDef("nic_rate_low", "ib_port", "nic", ("rate_gbps",), "mean", -1, 10.0),
    SignalDef("nic_link_downed_rate", "ib_port", "nic", ("link_downed",), "rate", 1, 0.02),
    SignalDef(
        "nic_integrity_error_rate",
        "ib_port",
        "nic",
        ("local_link_integrity_errors", "port_xmit_discards"),
        "rate",
        1,
        0.2,
    ),
    SignalDef("nic_speed_low", "nic", "nic", ("speed_mbps",), "mean", -1, 1000.0),
    SignalDef("nic_netdev_error_rate", "nic", "nic", ("rx_errors", "tx_errors"), "rate", 1, 0.2),
    SignalDef("disk_busy", "host_disk", "host", ("io_time_seconds",), "rate", 1, 0.05),
    SignalDef("fs_full", "host_fs", "host", ("used_ratio",), "mean", 1, 0.02),
    SignalDef(
        "host_memory_low",
        "host",
        "host",
        ("memory_available_bytes", "memory_total_bytes"),
        "ratio",
        -1,
        0.02,
    ),
]
SIGNALS: dict[str, SignalDef] = {d.name: d for d in _DEFS}
SIGNAL_NAMES: tuple[str, ...] = tuple(SIGNALS)
SIGNAL_INDEX: dict[str, int] = {name: i for i, name in enumerate(SIGNAL_NAMES)}
# Derived in the job step from train_step, against peers only (jobs are transient).
STEP_SIGNAL = "step_time_slow"
_INDEX_TAG = {
    "gpu": "gpu",
    "gpu_nvlink": "gpu",
    "host": None,
    "ib_port": None,
    "nic": None,
    "host_disk": None,
    "host_fs": None,
}
# A host has several disks and filesystems: each is reduced on its own (a counter per disk),
# then the host takes its worst one (``node|host|-#sda`` -> ``node|host|-``).
_PER_DEVICE = {"host_disk": "device", "host_fs": "mountpoint"}
# The signals read from each measurement, in the table's order.
_DEFS_OF: dict[str, list[SignalDef]] = {
    measurement: [d for d in _DEFS if d.measurement == measurement] for measurement in _INDEX_TAG
}


def entity_groups(frame: Frame) -> tuple[np.ndarray, np.ndarray]:
    """The ``node|component|index`` keys of a frame's entities, distinct in first-seen order,
    and each row's code (as :func:`factorize` of the per-row keys would give them), built from
    the codes of the tags that make the key, so that a key string is made once per entity and
    not once per row (a window holds tens of rows per entity)."""
    names, template = _key_parts(frame)
    columns = [frame.tags[name] for name in names]
    combined = np.zeros(len(frame), np.int64)
    values: list[np.ndarray] = []
    for name in names:
        distinct, codes = factorized_tag(frame, name)
        combined = combined * len(distinct) + codes
        values.append(distinct)
    _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # first-seen order, as factorize gives
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    rows = first[order]
    parts = [column[rows].tolist() for column in columns]
    keys = [template.format(*items) for items in zip(*parts, strict=True)]
    if len(set(keys)) < len(keys):  # tags that spell another entity's key: as the strings say
        rows_parts = zip(*(column.tolist() for column in columns), strict=True)
        return factorize(np.array([template.format(*row) for row in rows_parts], dtype=object))
    return np.array(keys, dtype=object), rank[inverse.reshape(-1)]


def _key_parts(frame: Frame) -> tuple[list[str], str]:
    """The tags an entity key is made of, and the format that joins them."""
    if frame.measurement in ("gpu", "gpu_nvlink"):
        return ["node", "gpu"], "{}|gpu|{}"
    if frame.measurement == "ib_port":
        return ["node", "hca", "port"], "{}|nic|{}/{}"
    if frame.measurement == "nic":
        return ["node", "device"], "{}|nic|{}"
    per = _PER_DEVICE.get(frame.measurement)
    if per is not None and per in frame.tags:
        return ["node", per], "{}|host|-#{}"
    return ["node"], "{}|host|-"


@dataclass
class CounterMemory:
    """Last counter value per (entity, field), so a rate spans window boundaries."""

    last: dict[tuple[str, str], float] = field(default_factory=dict)


@dataclass
class WindowSignals:
    """Signal values of one window: ``values[i, j]`` is entity ``entities[i]``, signal ``j``
    (NaN where the entity has no such signal)."""

    entities: np.ndarray  # object array of entity keys
    values: np.ndarray  # float64 (n_entities, n_signals)
    profiles: np.ndarray  # object array: hardware profile per entity ("" when unknown)


def derive(frames: list[Frame], window_seconds: float, memory: CounterMemory) -> WindowSignals:
    """All derived signals of one window's frames (any mix of measurements)."""
    # Per frame that gave any: its entity keys and (signal, value per key) in the order
    # reduced; a later frame's value of an (entity, signal) overwrites an earlier one's.
    written: list[tuple[list[str], list[tuple[int, np.ndarray]]]] = []
    profiles: dict[str, str] = {}
    for frame in frames:
        if frame.measurement not in _INDEX_TAG or len(frame) == 0:
            continue
        entities = _FrameEntities.of(frame)
        if "profile" in frame.tags:
            _remember_profiles(frame, profiles)
        keys, columns = entities.keys, []
        for definition in _DEFS_OF[frame.measurement]:
            if definition.fields[0] not in frame.fields:
                continue
            reduced = _reduce(definition, frame, entities, window_seconds, memory)
            if reduced is None:
                continue
            if frame.measurement in _PER_DEVICE:
                by_device = dict(zip(entities.keys, reduced.tolist(), strict=True))
                worst = _worst_device(by_device, definition.direction)
                keys, reduced = list(worst), np.array(list(worst.values()), dtype=np.float64)
            columns.append((SIGNAL_INDEX[definition.name], reduced))
        if columns:
            written.append((keys, columns))
    entities_sorted = sorted(set().union(*(keys for keys, _ in written)))
    index = {key: i for i, key in enumerate(entities_sorted)}
    values = np.full((len(entities_sorted), len(SIGNAL_NAMES)), np.nan)
    for keys, columns in written:
        rows = np.fromiter(map(index.__getitem__, keys), dtype=np.int64, count=len(keys))
        for signal, column in columns:
            values[rows, signal] = column
    entity_array = np.array(entities_sorted, dtype=object)
    profile_array = np.array(
        [profiles.get(e.split("|", 1)[0], "") for e in entities_sorted], dtype=object
    )
    return WindowSignals(entity_array, values, profile_array)


@dataclass
class _FrameEntities:
    """A frame's entities, found once for all the signals read from it: their keys
    (first-seen order), each row's entity, rows per entity, and, for counters, the rows in
    (entity, time) order."""

    keys: list[str]
    inverse: np.ndarray
    counts: np.ndarray
    time_ns: np.ndarray
    _by_time: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    @classmethod
    def of(cls, frame: Frame) -> _FrameEntities:
        unique, inverse = entity_groups(frame)
        counts = np.bincount(inverse, minlength=len(unique)).astype(np.float64)
        return cls(unique.tolist(), inverse, counts, frame.time_ns)

    def by_time(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The rows sorted by entity then time, each sorted row's entity, and each entity's
        first and last sorted row: the same for every counter of the frame."""
        if self._by_time is None:
            order = np.lexsort((self.time_ns, self.inverse))
            grouped = self.inverse[order]
            first = np.ones(len(order), dtype=bool)
            first[1:] = grouped[1:] != grouped[:-1]
            first_rows = np.flatnonzero(first)
            last_rows = np.append(first_rows[1:] - 1, len(order) - 1)  # the same entities
            self._by_time = (order, grouped, first_rows, last_rows)
        return self._by_time


def _worst_device(values: dict[str, float], direction: int) -> dict[str, float]:
    worst: dict[str, float] = {}
    for key, value in values.items():
        host = key.split("#", 1)[0]
        old = worst.get(host)
        if old is None or direction * value > direction * old:
            worst[host] = value
    return worst


def _remember_profiles(frame: Frame, out: dict[str, str]) -> None:
    # Profiles are per GPU; NIC and host entities are judged by their node's GPU profile.
    for node, profile in zip(
        frame.tags["node"].tolist(), frame.tags["profile"].tolist(), strict=True
    ):
        if node not in out:
            out[node] = str(profile)


def factorized_tag(frame: Frame, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A tag column's values (each once) and each row's code: the decoder's where it read the
    tags as codes (``Frame.tag_codes``: a value may have no row there, and the order is not
    first-seen), else :func:`factorize`'s. Its callers group rows by the codes, whatever they
    number."""
    known = frame.tag_codes.get(name) if frame.tag_codes is not None else None
    return known if known is not None else factorize(frame.tags[name])


def factorize(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys (first-seen order) and each row's code. A dict beats ``np.unique`` here:
    sorting object arrays of strings compares them in Python."""
    listed = keys.tolist()
    distinct = list(dict.fromkeys(listed))
    codes = {k: i for i, k in enumerate(distinct)}
    inverse = np.fromiter(map(codes.__getitem__, listed), dtype=np.int64, count=len(listed))
    return np.array(distinct, dtype=object), inverse


def _reduce(
    definition: SignalDef,
    frame: Frame,
    entities: _FrameEntities,
    window_seconds: float,
    memory: CounterMemory,
) -> np.ndarray | None:
    """One signal's value per entity of the frame (None when the frame lacks a field)."""
    inverse, counts, size = entities.inverse, entities.counts, len(entities.keys)
    column = frame.fields[definition.fields[0]]
    if definition.reduce == "rate":
        total = np.zeros(size)
        for name in definition.fields:
            if name in frame.fields:
                total += _counter_increase(frame, name, entities, memory)
        result = total / window_seconds
    elif definition.reduce == "bits":
        hits = (column.astype(np.int64) & definition.bits) != 0
        result = np.bincount(inverse, weights=hits, minlength=size) / counts
    elif definition.reduce == "below":
        maximum = frame.fields.get(definition.fields[1])
        if maximum is None:
            return None
        hits = column < maximum
        result = np.bincount(inverse, weights=hits, minlength=size) / counts
    elif definition.reduce == "not_equal":
        hits = column != definition.constant
        result = np.bincount(inverse, weights=hits, minlength=size) / counts
    elif definition.reduce == "below_profile":
        limits = _profile_limits(frame, definition.profile_limit)
        hits = column < limits
        result = np.bincount(inverse, weights=hits, minlength=size) / counts
    elif definition.reduce == "below_limit":
        if "profile" not in frame.tags:
            return None
        # 5% under the model's default: an operator's or a firmware's cap, not rounding.
        hits = column < 0.95 * _profile_limits(frame, definition.profile_limit, from_limits=True)
        result = np.bincount(inverse, weights=hits, minlength=size) / counts
    elif definition.reduce == "ratio":
        maximum = frame.fields.get(definition.fields[1])
        if maximum is None:
            return None
        with np.errstate(divide="ignore", invalid="ignore"):
            share = column.astype(np.float64) / maximum.astype(np.float64)
        share = np.where(np.isfinite(share), share, np.nan)
        seen = np.bincount(inverse, weights=np.isfinite(share).astype(np.float64), minlength=size)
        summed = np.bincount(inverse, weights=np.nan_to_num(share), minlength=size)
        result = np.divide(summed, seen, out=np.full(size, np.nan), where=seen > 0)
    else:
        result = np.bincount(inverse, weights=column.astype(np.float64), minlength=size) / counts
    return result


def _profile_limits(frame: Frame, attribute: str, from_limits: bool = False) -> np.ndarray:
    """Per row, the row's hardware profile's value; -inf when unknown, so that nothing is
    ever below it: an unknown model has no nominal value to fall short of."""
    profiles = load_profiles()
    names, inverse = factorized_tag(frame, "profile")  # a dict: np.unique sorts strings

    def value(name: str) -> float:
        profile = profiles.get(name)
        if profile is None:
            return -np.inf
        if from_limits:
            return float(profile.limits.get(attribute, -np.inf))
        return float(getattr(profile, attribute))

    return np.array([value(n) for n in names.tolist()])[inverse]


def _counter_increase(
    frame: Frame, name: str, entities: _FrameEntities, memory: CounterMemory
) -> np.ndarray:
    """Reset-aware increase per entity: a drop means the counter restarted from zero."""
    order, grouped, first_rows, last_rows = entities.by_time()
    sorted_values = frame.fields[name].astype(np.float64)[order]
    previous = np.empty(len(order))
    previous[1:] = sorted_values[:-1]
    # The first row of each entity continues from the last value of the previous window.
    keys = list(zip(entities.keys, repeat(name)))  # first_rows are entities 0, 1, ...
    previous[first_rows] = list(map(memory.last.get, keys, sorted_values[first_rows].tolist()))
    step = sorted_values - previous
    step = np.where(step < 0, sorted_values, step)
    memory.last.update(zip(keys, sorted_values[last_rows].tolist(), strict=True))
    return np.bincount(grouped, weights=step, minlength=len(entities.keys))
