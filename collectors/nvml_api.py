"""The small NVML interface the GPU collector uses, and its implementation on nvidia-ml-py.

The collector sees GPUs by index and plain Python values; the four outcomes that matter are
exceptions of this module, whatever raised them:

- :class:`NvmlNotSupported`: this GPU or driver has no such signal (NVML NotSupported,
  FunctionNotFound on an older driver, InvalidArgument for a link that does not exist);
- :class:`NvmlGpuLost`: the GPU stopped answering (NVML GpuIsLost; the XID 79 situation);
- :class:`NvmlUnavailable`: no NVIDIA driver or library on this node;
- :class:`NvmlError`: anything else.

Tests use ``collectors.nvml_fake.FakeNvml``, which obeys the same :class:`Nvml` protocol.

>>> api = PynvmlApi()
>>> try:
...     api.init()
... except NvmlUnavailable:
...     pass  # no driver on this machine
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

T = TypeVar("T")
ClockDomain = Literal["sm", "mem"]
NvlinkCounter = Literal["crc_flit", "crc_data", "replay", "recovery"]
FieldValue = int | float | None  # one answer of nvmlDeviceGetFieldValues; None: not supported

# Field ids of nvmlDeviceGetFieldValues (nvml.h NVML_FI_DEV_*; part of NVML's ABI), for the
# counters read in one call. ECC totals and retired pages since R384, remapped rows since R460.
FI_ECC_SBE_VOL_TOTAL = 3
FI_ECC_DBE_VOL_TOTAL = 4
FI_ECC_SBE_AGG_TOTAL = 5
FI_ECC_DBE_AGG_TOTAL = 6
FI_RETIRED_SBE = 29
FI_RETIRED_DBE = 30
FI_RETIRED_PENDING = 31
FI_MEMORY_TEMP = 82
FI_PCIE_REPLAY_COUNTER = 94
FI_REMAPPED_COR = 142
FI_REMAPPED_UNC = 143
FI_REMAPPED_PENDING = 144
FI_REMAPPED_FAILURE = 145


class NvmlError(Exception):
    """An NVML call failed for a reason not covered by the subclasses."""


class NvmlNotSupported(NvmlError):
    """The signal does not exist on this GPU or driver: absent, not an error."""


class NvmlGpuLost(NvmlError):
    """The GPU stopped answering NVML."""


class NvmlUnavailable(NvmlError):
    """No NVIDIA driver or NVML library on this node."""


@dataclass(frozen=True)
class XidEvent:
    gpu: int
    xid: int


class Nvml(Protocol):
    def init(self) -> None: ...
    def shutdown(self) -> None: ...
    def driver_version(self) -> str: ...
    def device_count(self) -> int: ...
    def uuid(self, gpu: int) -> str: ...
    def serial(self, gpu: int) -> str: ...
    def pci_bus_id(self, gpu: int) -> str: ...
    def name(self, gpu: int) -> str: ...
    def utilization(self, gpu: int) -> tuple[int, int]: ...
    def memory(self, gpu: int) -> tuple[int, int]: ...
    def clock_mhz(self, gpu: int, domain: ClockDomain, *, maximum: bool = False) -> int: ...
    def power_mw(self, gpu: int) -> int: ...
    def power_limit_mw(self, gpu: int) -> int: ...
    def temperature(self, gpu: int) -> float: ...
    def temperature_slowdown(self, gpu: int) -> float: ...
    def memory_temperature(self, gpu: int) -> float: ...
    def clocks_event_reasons(self, gpu: int) -> int: ...
    def ecc_errors(self, gpu: int, *, corrected: bool, volatile: bool) -> int: ...
    def retired_pages(self, gpu: int, *, double_bit: bool) -> int: ...
    def retired_pages_pending(self, gpu: int) -> bool: ...
    def remapped_rows(self, gpu: int) -> tuple[int, int, bool, bool]: ...
    def pcie_link_gen(self, gpu: int, *, maximum: bool = False) -> int: ...
    def pcie_link_width(self, gpu: int, *, maximum: bool = False) -> int: ...
    def pcie_replay_counter(self, gpu: int) -> int: ...
    def field_values(self, gpu: int, field_ids: Sequence[int]) -> list[FieldValue]: ...
    def nvlink_max_links(self) -> int: ...
    def nvlink_active(self, gpu: int, link: int) -> bool: ...
    def nvlink_errors(self, gpu: int, link: int, counter: NvlinkCounter) -> int: ...
    def register_xid_events(self, gpus: Sequence[int]) -> list[int]: ...
    def wait_xid(self, timeout_ms: int) -> XidEvent | None: ...


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# nvmlValueType_t -> the member of the nvmlValue_t union that holds the answer
_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal",
                  6: "usVal"}  # fmt: skip


def _field_value(answer: Any) -> FieldValue:
    member = _VALUE_MEMBERS.get(int(answer.valueType))
    if member is None:
        raise NvmlError(f"field {answer.fieldId}: unknown value type {answer.valueType}")
    value = getattr(answer.value, member)
    return float(value) if member == "dVal" else int(value)


class PynvmlApi:
    """:class:`Nvml` on nvidia-ml-py (``import pynvml``), imported on :meth:`init` only."""

    def __init__(self) -> None:
        self._nv: Any = None
        self._handles: dict[int, Any] = {}
        self._event_set: Any = None

    # -- plumbing: every NVML call goes through _call, which maps its errors ------------------

    def _call(self, function: Callable[..., T], *args: Any) -> T:
        nv = self._nv
        try:
            return function(*args)
        except nv.NVMLError_GpuIsLost as error:
            raise NvmlGpuLost(str(error)) from None
        except (
            nv.NVMLError_NotSupported,
            nv.NVMLError_FunctionNotFound,
            nv.NVMLError_InvalidArgument,
        ) as error:
            raise NvmlNotSupported(str(error)) from None
        except (nv.NVMLError_LibraryNotFound, nv.NVMLError_DriverNotLoaded) as error:
            raise NvmlUnavailable(str(error)) from None
        except nv.NVMLError as error:
            raise NvmlError(str(error)) from None

    def _handle(self, gpu: int) -> Any:
        if gpu not in self._handles:
            self._handles[gpu] = self._call(self._nv.nvmlDeviceGetHandleByIndex, gpu)
        return self._handles[gpu]

    def _device(self, function_name: str, gpu: int, *args: Any) -> Any:
        return self._call(getattr(self._nv, function_name), self._handle(gpu), *args)

    def init(self) -> None:
        try:
            import pynvml
        except ImportError as error:
            raise NvmlUnavailable(f"nvidia-ml-py is not installed: {error}") from None
        self._nv = pynvml
        self._call(pynvml.nvmlInit)

    def shutdown(self) -> None:
        if self._nv is not None:
            self._handles.clear()
            self._call(self._nv.nvmlShutdown)

    # -- identity -----------------------------------------------------------------------------

    def driver_version(self) -> str:
        return _text(self._call(self._nv.nvmlSystemGetDriverVersion))

    def device_count(self) -> int:
        return int(self._call(self._nv.nvmlDeviceGetCount))

    def uuid(self, gpu: int) -> str:
        return _text(self._device("nvmlDeviceGetUUID", gpu))

    def serial(self, gpu: int) -> str:
        return _text(self._device("nvmlDeviceGetSerial", gpu))

    def pci_bus_id(self, gpu: int) -> str:
        return _text(self._device("nvmlDeviceGetPciInfo", gpu).busId)

    def name(self, gpu: int) -> str:
        return _text(self._device("nvmlDeviceGetName", gpu))

    # -- signals ------------------------------------------------------------------------------

    def utilization(self, gpu: int) -> tuple[int, int]:
        rates = self._device("nvmlDeviceGetUtilizationRates", gpu)
        return int(rates.gpu), int(rates.memory)

    def memory(self, gpu: int) -> tuple[int, int]:
        info = self._device("nvmlDeviceGetMemoryInfo", gpu)
        return int(info.used), int(info.total)

    def clock_mhz(self, gpu: int, domain: ClockDomain, *, maximum: bool = False) -> int:
        kind = self._nv.NVML_CLOCK_SM if domain == "sm" else self._nv.NVML_CLOCK_MEM
        function = "nvmlDeviceGetMaxClockInfo" if maximum else "nvmlDeviceGetClockInfo"
        return int(self._device(function, gpu, kind))

    def power_mw(self, gpu: int) -> int:
        return int(self._device("nvmlDeviceGetPowerUsage", gpu))

    def power_limit_mw(self, gpu: int) -> int:
        return int(self._device("nvmlDeviceGetEnforcedPowerLimit", gpu))

    def temperature(self, gpu: int) -> float:
        sensor = self._nv.NVML_TEMPERATURE_GPU
        try:
            return float(self._device("nvmlDeviceGetTemperatureV", gpu, sensor))
        except NvmlNotSupported:  # drivers before the V call (R535 and older)
            return float(self._device("nvmlDeviceGetTemperature", gpu, sensor))

    def temperature_slowdown(self, gpu: int) -> float:
        threshold = self._nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
        return float(self._device("nvmlDeviceGetTemperatureThreshold", gpu, threshold))

    def memory_temperature(self, gpu: int) -> float:
        # HBM temperature exists only as a field value (NVML_FI_DEV_MEMORY_TEMP).
        (value,) = self.field_values(gpu, [FI_MEMORY_TEMP])
        if value is None:
            raise NvmlNotSupported("memory temperature")
        return float(value)

    def field_values(self, gpu: int, field_ids: Sequence[int]) -> list[FieldValue]:
        """Many counters of one GPU in one call (``nvmlDeviceGetFieldValues``, as DCGM reads
        them). A field this GPU or driver lacks answers None; a driver without the call raises
        NvmlNotSupported (FunctionNotFound), and the collector reads each value on its own."""
        nv = self._nv
        answers = self._device("nvmlDeviceGetFieldValues", gpu, list(field_ids))
        values: list[FieldValue] = []
        for answer in answers:
            if answer.nvmlReturn == nv.NVML_ERROR_GPU_IS_LOST:
                raise NvmlGpuLost(f"field {answer.fieldId}")
            ok = answer.nvmlReturn == nv.NVML_SUCCESS
            values.append(_field_value(answer) if ok else None)
        return values

    def clocks_event_reasons(self, gpu: int) -> int:
        return int(self._device("nvmlDeviceGetCurrentClocksEventReasons", gpu))

    def ecc_errors(self, gpu: int, *, corrected: bool, volatile: bool) -> int:
        nv = self._nv
        kind = (
            nv.NVML_MEMORY_ERROR_TYPE_CORRECTED
            if corrected
            else nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        )
        counter = nv.NVML_VOLATILE_ECC if volatile else nv.NVML_AGGREGATE_ECC
        return int(self._device("nvmlDeviceGetTotalEccErrors", gpu, kind, counter))

    def retired_pages(self, gpu: int, *, double_bit: bool) -> int:
        nv = self._nv
        cause = (
            nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
            if double_bit
            else nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
        )
        return len(self._device("nvmlDeviceGetRetiredPages", gpu, cause))

    def retired_pages_pending(self, gpu: int) -> bool:
        return bool(self._device("nvmlDeviceGetRetiredPagesPendingStatus", gpu))

    def remapped_rows(self, gpu: int) -> tuple[int, int, bool, bool]:
        corrected, uncorrected, pending, failure = self._device("nvmlDeviceGetRemappedRows", gpu)
        return int(corrected), int(uncorrected), bool(pending), bool(failure)

    def pcie_link_gen(self, gpu: int, *, maximum: bool = False) -> int:
        function = (
            "nvmlDeviceGetMaxPcieLinkGeneration"
            if maximum
            else "nvmlDeviceGetCurrPcieLinkGeneration"
        )
        return int(self._device(function, gpu))

    def pcie_link_width(self, gpu: int, *, maximum: bool = False) -> int:
        function = "nvmlDeviceGetMaxPcieLinkWidth" if maximum else "nvmlDeviceGetCurrPcieLinkWidth"
        return int(self._device(function, gpu))

    def pcie_replay_counter(self, gpu: int) -> int:
        return int(self._device("nvmlDeviceGetPcieReplayCounter", gpu))

    def nvlink_max_links(self) -> int:
        return int(self._nv.NVML_NVLINK_MAX_LINKS)

    def nvlink_active(self, gpu: int, link: int) -> bool:
        return self._device("nvmlDeviceGetNvLinkState", gpu, link) == self._nv.NVML_FEATURE_ENABLED

    def nvlink_errors(self, gpu: int, link: int, counter: NvlinkCounter) -> int:
        nv = self._nv
        kind = {
            "crc_flit": nv.NVML_NVLINK_ERROR_DL_CRC_FLIT,
            "crc_data": nv.NVML_NVLINK_ERROR_DL_CRC_DATA,
            "replay": nv.NVML_NVLINK_ERROR_DL_REPLAY,
            "recovery": nv.NVML_NVLINK_ERROR_DL_RECOVERY,
        }[counter]
        return int(self._device("nvmlDeviceGetNvLinkErrorCounter", gpu, link, kind))

    # -- XID events ---------------------------------------------------------------------------

    def register_xid_events(self, gpus: Sequence[int]) -> list[int]:
        """Registers XID events on each GPU that supports them; returns those GPUs."""
        nv = self._nv
        if self._event_set is None:
            self._event_set = self._call(nv.nvmlEventSetCreate)
        registered = []
        for gpu in gpus:
            try:
                self._device(
                    "nvmlDeviceRegisterEvents",
                    gpu,
                    nv.nvmlEventTypeXidCriticalError,
                    self._event_set,
                )
            except NvmlNotSupported:
                continue
            registered.append(gpu)
        return registered

    def wait_xid(self, timeout_ms: int) -> XidEvent | None:
        nv = self._nv
        try:
            data = nv.nvmlEventSetWait_v2(self._event_set, timeout_ms)
        except nv.NVMLError_Timeout:
            return None
        except nv.NVMLError_GpuIsLost as error:
            raise NvmlGpuLost(str(error)) from None
        except nv.NVMLError as error:
            raise NvmlError(str(error)) from None
        if not data.eventType & nv.nvmlEventTypeXidCriticalError:
            return None
        gpu = int(self._call(nv.nvmlDeviceGetIndex, data.device))
        return XidEvent(gpu, int(data.eventData))
