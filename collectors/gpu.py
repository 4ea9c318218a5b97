"""NVIDIA GPUs through NVML: identity, state, NVLinks, and XID events as they happen.

Every value is read through :class:`collectors.nvml_api.Nvml`; the NVML call behind each
field is in the schema's help text (schemas/fields.csv). A call answering NotSupported leaves
its field absent. A GPU answering GpuIsLost yields one ``event`` (kind=gpu_lost) when it is
first lost, and the other GPUs are collected as usual. Without a driver the collector raises
HardwareAbsent, which the agent counts as success.

What it costs (issue 39: real NVML took 4-4.4 ms of CPU per cycle for one H200, each call an
ioctl into the driver): the fast values (utilization, memory, clocks, power and its limit,
temperatures, throttle reasons) are read every run; the slow ones (ECC, retired pages,
remapped rows, PCIe generation, width and replays, maximum clocks, the slowdown threshold,
active NVLinks) every ``slow_every``-th run, and repeated from that read in between, so every
``gpu`` point has the same fields. The slow counters come in one ``nvmlDeviceGetFieldValues``
call where the driver has it (:data:`SLOW_FIELDS`), else one call each. The driver version is
read with the identities.

XIDs come from an NVML event set watched by :class:`XidWatcher` in a thread of its own, so
each one is written when it happens rather than at the next interval.

>>> from reflex_localize.collectors.nvml_fake import FakeNvml
>>> collector = GpuCollector("c1", "n1", nvml=FakeNvml.h100_node(gpus=1))
>>> sorted({p.measurement for p in collector.collect(0)})
['gpu', 'gpu_info', 'gpu_nvlink']
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from reflex_localize.collectors import nvml_api as fi
from reflex_localize.collectors.base import Emit, HardwareAbsent, SystemClock, base_tags
from reflex_localize.collectors.nvml_api import (
    Nvml,
    NvmlGpuLost,
    NvmlNotSupported,
    NvmlUnavailable,
    PynvmlApi,
)
from reflex_localize.schemas.codec import FieldValue, Point

if TYPE_CHECKING:
    from reflex_localize.collectors.settings import CollectSettings
    from reflex_localize.influx.config import Identity
from reflex_localize.schemas.hardware_profiles import profile_for_gpu_name

T = TypeVar("T")
log = logging.getLogger(__name__)
UNKNOWN_PROFILE = "unknown"


@dataclass(frozen=True)
class GpuIdentity:
    index: int
    uuid: str | None
    serial: str | None
    pci_bus_id: str | None
    name: str | None
    driver_version: str | None

    @property
    def profile(self) -> str:
        profile = profile_for_gpu_name(self.name) if self.name else None
        return profile.name if profile else UNKNOWN_PROFILE


@dataclass(frozen=True)
class GpuSample:
    """One read of one GPU, in the schema's units and names; None where NVML has no answer."""

    utilization_gpu_ratio: float | None = None
    utilization_memory_ratio: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    memory_clock_mhz: int | None = None
    memory_clock_max_mhz: int | None = None
    power_watts: float | None = None
    power_limit_watts: float | None = None
    temperature_celsius: float | None = None
    temperature_slowdown_celsius: float | None = None
    memory_temperature_celsius: float | None = None
    clocks_event_reasons: int | None = None
    ecc_corrected_volatile: int | None = None
    ecc_uncorrected_volatile: int | None = None
    ecc_corrected_aggregate_total: int | None = None
    ecc_uncorrected_aggregate_total: int | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    pcie_link_gen: int | None = None
    pcie_link_gen_max: int | None = None
    pcie_link_width: int | None = None
    pcie_link_width_max: int | None = None
    pcie_replay_errors: int | None = None
    nvlink_active_links: int | None = None


@dataclass(frozen=True)
class NvlinkSample:
    link: int
    active: bool
    crc_flit_errors: int | None
    crc_data_errors: int | None
    replay_errors: int | None
    recovery_errors: int | None


def optional(call: Callable[..., T], *args: object, **kwargs: object) -> T | None:
    """``call(...)``, or None when NVML says NotSupported. GpuIsLost and others propagate."""
    try:
        return call(*args, **kwargs)
    except NvmlNotSupported:
        return None


def _scaled(value: float | None, divisor: float) -> float | None:
    return None if value is None else value / divisor


def read_identity(nvml: Nvml, gpu: int, driver_version: str | None) -> GpuIdentity:
    return GpuIdentity(
        index=gpu,
        uuid=optional(nvml.uuid, gpu),
        serial=optional(nvml.serial, gpu),
        pci_bus_id=optional(nvml.pci_bus_id, gpu),
        name=optional(nvml.name, gpu),
        driver_version=driver_version,
    )


def read_sample(nvml: Nvml, gpu: int, nvlinks: list[int]) -> GpuSample:
    """Every value of one GPU, one call each (the fast and the slow ones)."""
    return GpuSample(**read_fast(nvml, gpu), **read_slow(nvml, gpu, nvlinks, batched=False))


def read_fast(nvml: Nvml, gpu: int) -> dict[str, Any]:
    """The values read every run: they follow the workload and the clocks' faults."""
    utilization = optional(nvml.utilization, gpu)
    memory = optional(nvml.memory, gpu)
    return {
        "utilization_gpu_ratio": utilization[0] / 100 if utilization else None,
        "utilization_memory_ratio": utilization[1] / 100 if utilization else None,
        "memory_used_bytes": memory[0] if memory else None,
        "memory_total_bytes": memory[1] if memory else None,
        "sm_clock_mhz": optional(nvml.clock_mhz, gpu, "sm"),
        "memory_clock_mhz": optional(nvml.clock_mhz, gpu, "mem"),
        "power_watts": _scaled(optional(nvml.power_mw, gpu), 1000),  # NVML reports milliwatts
        "power_limit_watts": _scaled(optional(nvml.power_limit_mw, gpu), 1000),
        "temperature_celsius": optional(nvml.temperature, gpu),
        "memory_temperature_celsius": optional(nvml.memory_temperature, gpu),
        "clocks_event_reasons": optional(nvml.clocks_event_reasons, gpu),
    }


# GpuSample field <- nvmlDeviceGetFieldValues field id; booleans answer 0/1.
SLOW_FIELDS = {
    "ecc_corrected_volatile": fi.FI_ECC_SBE_VOL_TOTAL,
    "ecc_uncorrected_volatile": fi.FI_ECC_DBE_VOL_TOTAL,
    "ecc_corrected_aggregate_total": fi.FI_ECC_SBE_AGG_TOTAL,
    "ecc_uncorrected_aggregate_total": fi.FI_ECC_DBE_AGG_TOTAL,
    "retired_pages_sbe": fi.FI_RETIRED_SBE,
    "retired_pages_dbe": fi.FI_RETIRED_DBE,
    "retired_pages_pending": fi.FI_RETIRED_PENDING,
    "remapped_rows_correctable": fi.FI_REMAPPED_COR,
    "remapped_rows_uncorrectable": fi.FI_REMAPPED_UNC,
    "remapped_rows_pending": fi.FI_REMAPPED_PENDING,
    "remapped_rows_failure": fi.FI_REMAPPED_FAILURE,
    "pcie_replay_errors": fi.FI_PCIE_REPLAY_COUNTER,
}
_FLAGS = {"retired_pages_pending", "remapped_rows_pending", "remapped_rows_failure"}


def read_slow(nvml: Nvml, gpu: int, nvlinks: list[int], *, batched: bool) -> dict[str, Any]:
    """The values read every ``slow_every``-th run: counters, link state, limits. With
    ``batched``, the counters in one field-values call (raises NvmlNotSupported without it)."""
    counters = read_counters_batched(nvml, gpu) if batched else read_counters(nvml, gpu)
    active_links = [link for link in nvlinks if optional(nvml.nvlink_active, gpu, link)]
    return {
        **counters,
        "sm_clock_max_mhz": optional(nvml.clock_mhz, gpu, "sm", maximum=True),
        "memory_clock_max_mhz": optional(nvml.clock_mhz, gpu, "mem", maximum=True),
        "temperature_slowdown_celsius": optional(nvml.temperature_slowdown, gpu),
        "pcie_link_gen": optional(nvml.pcie_link_gen, gpu),
        "pcie_link_gen_max": optional(nvml.pcie_link_gen, gpu, maximum=True),
        "pcie_link_width": optional(nvml.pcie_link_width, gpu),
        "pcie_link_width_max": optional(nvml.pcie_link_width, gpu, maximum=True),
        "nvlink_active_links": len(active_links) if nvlinks else None,
    }


def read_counters_batched(nvml: Nvml, gpu: int) -> dict[str, Any]:
    values = nvml.field_values(gpu, list(SLOW_FIELDS.values()))
    return {
        name: bool(value) if name in _FLAGS and value is not None else value
        for name, value in zip(SLOW_FIELDS, values, strict=True)
    }


def read_counters(nvml: Nvml, gpu: int) -> dict[str, Any]:
    """The same counters one call each (drivers without nvmlDeviceGetFieldValues)."""
    remapped = optional(nvml.remapped_rows, gpu)
    return {
        "ecc_corrected_volatile": optional(nvml.ecc_errors, gpu, corrected=True, volatile=True),
        "ecc_uncorrected_volatile": optional(nvml.ecc_errors, gpu, corrected=False, volatile=True),
        "ecc_corrected_aggregate_total": optional(
            nvml.ecc_errors, gpu, corrected=True, volatile=False
        ),
        "ecc_uncorrected_aggregate_total": optional(
            nvml.ecc_errors, gpu, corrected=False, volatile=False
        ),
        "retired_pages_sbe": optional(nvml.retired_pages, gpu, double_bit=False),
        "retired_pages_dbe": optional(nvml.retired_pages, gpu, double_bit=True),
        "retired_pages_pending": optional(nvml.retired_pages_pending, gpu),
        "remapped_rows_correctable": remapped[0] if remapped else None,
        "remapped_rows_uncorrectable": remapped[1] if remapped else None,
        "remapped_rows_pending": remapped[2] if remapped else None,
        "remapped_rows_failure": remapped[3] if remapped else None,
        "pcie_replay_errors": optional(nvml.pcie_replay_counter, gpu),
    }


def discover_nvlinks(nvml: Nvml, gpu: int) -> list[int]:
    """Links that exist on this GPU: NVML answers NotSupported/InvalidArgument for the others."""
    return [
        link
        for link in range(nvml.nvlink_max_links())
        if optional(nvml.nvlink_active, gpu, link) is not None
    ]


def read_nvlink(nvml: Nvml, gpu: int, link: int) -> NvlinkSample:
    return NvlinkSample(
        link=link,
        active=bool(optional(nvml.nvlink_active, gpu, link)),
        crc_flit_errors=optional(nvml.nvlink_errors, gpu, link, "crc_flit"),
        crc_data_errors=optional(nvml.nvlink_errors, gpu, link, "crc_data"),
        replay_errors=optional(nvml.nvlink_errors, gpu, link, "replay"),
        recovery_errors=optional(nvml.nvlink_errors, gpu, link, "recovery"),
    )


def present(values: dict[str, Any]) -> dict[str, FieldValue]:
    return {key: value for key, value in values.items() if value is not None}


class GpuCollector:
    """``gpu`` every run, ``gpu_nvlink`` every ``nvlink_interval_s``, ``gpu_info`` rarely."""

    name = "gpu"

    def __init__(
        self,
        cluster: str,
        node: str,
        *,
        nvml: Nvml | None = None,
        interval_s: float = 1.0,
        nvlink_interval_s: float = 10.0,
        info_interval_s: float = 300.0,
        slow_every: int = 10,
    ) -> None:
        self.nvml: Nvml = nvml if nvml is not None else PynvmlApi()
        self.interval_s = interval_s
        self.slow_every = max(1, slow_every)
        self._runs = 0
        self._slow: dict[int, dict[str, Any]] = {}  # per GPU: its last slow read
        self._batched: dict[int, bool] = {}  # per GPU: field values work (False: one by one)
        self._driver: str | None = None
        self.nvlink_interval_s = nvlink_interval_s
        self.info_interval_s = info_interval_s
        self._tags = base_tags(cluster, node)
        self._initialized = False
        self._identities: dict[int, GpuIdentity] = {}
        self._nvlinks: dict[int, list[int]] = {}
        self._lost: set[int] = set()
        self._next_info_ns = 0
        self._next_nvlink_ns = 0
        self._watcher: XidWatcher | None = None

    def _ensure_initialized(self) -> None:
        if self._initialized:
            return
        try:
            self.nvml.init()
        except NvmlUnavailable as error:
            raise HardwareAbsent(f"no NVIDIA driver: {error}") from None
        self._initialized = True

    def collect(self, now_ns: int) -> Iterator[Point]:
        self._ensure_initialized()
        info_due = now_ns >= self._next_info_ns
        nvlink_due = now_ns >= self._next_nvlink_ns
        if info_due:
            self._next_info_ns = now_ns + round(self.info_interval_s * 1e9)
            self._identities.clear()
        if nvlink_due:
            self._next_nvlink_ns = now_ns + round(self.nvlink_interval_s * 1e9)
        if info_due:
            self._driver = optional(self.nvml.driver_version)
        slow_due = self._runs % self.slow_every == 0
        self._runs += 1
        for gpu in range(self.nvml.device_count()):
            try:
                yield from self._collect_gpu(gpu, self._driver, now_ns, info_due, nvlink_due,
                                             slow_due)  # fmt: skip
            except NvmlGpuLost as error:
                if gpu not in self._lost:
                    self._lost.add(gpu)
                    yield self._lost_event(gpu, str(error), now_ns)
            else:
                self._lost.discard(gpu)

    def _collect_gpu(
        self,
        gpu: int,
        driver: str | None,
        now_ns: int,
        info_due: bool,
        nvlink_due: bool,
        slow_due: bool,
    ) -> Iterator[Point]:
        identity = self._identity(gpu, driver)
        if gpu not in self._nvlinks:
            self._nvlinks[gpu] = discover_nvlinks(self.nvml, gpu)
        if slow_due or gpu not in self._slow:
            self._slow[gpu] = self._read_slow(gpu)
        sample = GpuSample(**read_fast(self.nvml, gpu), **self._slow[gpu])
        tags = {**self._tags, "gpu": str(gpu), "profile": identity.profile}
        points = [Point("gpu", tags, present(asdict(sample)), now_ns)]
        if info_due:
            info = present(asdict(identity))
            info.pop("index")
            if info:
                points.append(Point("gpu_info", tags, info, now_ns))
        if nvlink_due:
            for link in self._nvlinks[gpu]:
                fields = present(asdict(read_nvlink(self.nvml, gpu, link)))
                link_tags = {**self._tags, "gpu": str(gpu), "link": str(fields.pop("link"))}
                points.append(Point("gpu_nvlink", link_tags, fields, now_ns))
        # Points are yielded only once the whole GPU has answered, so a GPU lost halfway
        # gives a gpu_lost event and no half-read state.
        yield from (point for point in points if point.fields)

    def _read_slow(self, gpu: int) -> dict[str, Any]:
        if self._batched.get(gpu, True):
            try:
                slow = read_slow(self.nvml, gpu, self._nvlinks[gpu], batched=True)
                self._batched[gpu] = True
                return slow
            except NvmlNotSupported:  # a driver without nvmlDeviceGetFieldValues
                self._batched[gpu] = False
        return read_slow(self.nvml, gpu, self._nvlinks[gpu], batched=False)

    def _identity(self, gpu: int, driver: str | None) -> GpuIdentity:
        if gpu not in self._identities:
            self._identities[gpu] = read_identity(self.nvml, gpu, driver)
        return self._identities[gpu]

    def _lost_event(self, gpu: int, reason: str, now_ns: int) -> Point:
        fields: dict[str, int | str] = {"gpu": gpu, "message": f"GPU {gpu} is lost: {reason}"}
        known = self._identities.get(gpu)
        if known is not None and known.pci_bus_id:
            fields["device"] = known.pci_bus_id
        tags = {**self._tags, "source": "nvml", "kind": "gpu_lost"}
        return Point("event", tags, fields, now_ns)

    # -- the XID thread -----------------------------------------------------------------------

    def start_background(self, emit: Emit) -> None:
        try:
            self._ensure_initialized()
        except HardwareAbsent:
            return
        self._watcher = XidWatcher(self.nvml, emit, self._tags, self._identities)
        self._watcher.start()

    def stop_background(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None


class XidWatcher:
    """Waits on the NVML event set in a daemon thread and emits each XID as one event point."""

    def __init__(
        self,
        nvml: Nvml,
        emit: Emit,
        tags: dict[str, str],
        identities: dict[int, GpuIdentity],
        *,
        clock: SystemClock | None = None,
        timeout_ms: int = 1000,
    ) -> None:
        self.nvml = nvml
        self.emit = emit
        self.timeout_ms = timeout_ms
        self.events = 0
        self.errors = 0
        self._tags = {**tags, "source": "nvml", "kind": "xid"}
        self._identities = identities
        self._clock = clock or SystemClock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reflex-xid", daemon=True)

    def start(self) -> None:
        registered = self.nvml.register_xid_events(range(self.nvml.device_count()))
        log.info("watching XID events on GPUs %s", registered)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.timeout_ms / 1000 + 1)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                event = self.nvml.wait_xid(self.timeout_ms)
            except Exception as error:  # the watcher must outlive a bad GPU or driver hiccup
                self.errors += 1
                log.warning("XID wait failed: %s", error)
                self._stop.wait(1.0)
                continue
            if event is not None:
                self.events += 1
                self.emit([self.point(event.gpu, event.xid, self._clock.time_ns())])

    def point(self, gpu: int, xid: int, now_ns: int) -> Point:
        identity = self._identities.get(gpu)
        profile = profile_for_gpu_name(identity.name) if identity and identity.name else None
        meaning = profile.xid(xid).meaning if profile else ""
        fields: dict[str, int | str] = {
            "code": xid,
            "gpu": gpu,
            "message": f"XID {xid} on GPU {gpu}" + (f": {meaning}" if meaning else ""),
        }
        if identity is not None and identity.pci_bus_id:
            fields["device"] = identity.pci_bus_id
        return Point("event", self._tags, fields, now_ns)


def build(identity: Identity, settings: CollectSettings) -> GpuCollector:
    return GpuCollector(
        identity.cluster,
        identity.node,
        interval_s=settings.interval("gpu", 1.0),
        nvlink_interval_s=settings.interval("gpu_nvlink", 10.0),
        info_interval_s=settings.interval("gpu_info", 300.0),
    )
