"""A fake NVML obeying :class:`collectors.nvml_api.Nvml`, for tests, benchmarks and the demo.

Each GPU answers from a :class:`FakeGpu`. Name a method in ``unsupported`` to make it raise
NotSupported (``field_values`` too: a driver without the call), set ``lost`` to make every call
raise GpuIsLost, and ``push_xid`` to queue an XID event for ``wait_xid``. Values imitate an
8 x H100 SXM5 node. ``field_values`` answers from the same values (a field whose method is
unsupported answers None), unless ``field_answers`` holds what a real driver said
(:mod:`collectors.nvml_recorded`).

``call_cost_s`` makes each call spend that much CPU time, as a real NVML call does in the
driver's ioctl (issue 39: about 4.2 ms per cycle for one H200's ~25 calls): benchmarks then
show what fewer calls save. One ``field_values`` call costs ``call_cost_s`` plus a tenth of it
per field (an assumption, to be replaced by ``benchmarks/real_gpu_check.py``'s measurement).

>>> nvml = FakeNvml.h100_node(gpus=2)
>>> nvml.init(); nvml.device_count(), nvml.name(0)
(2, 'NVIDIA H100 80GB HBM3')
>>> nvml.gpus[1].unsupported.add("memory_temperature")
>>> nvml.memory_temperature(1)
Traceback (most recent call last):
...
reflex_localize.collectors.nvml_api.NvmlNotSupported: memory_temperature
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from reflex_localize.collectors import nvml_api as fi
from reflex_localize.collectors.nvml_api import (
    ClockDomain,
    FieldValue,
    NvlinkCounter,
    NvmlGpuLost,
    NvmlNotSupported,
    NvmlUnavailable,
    XidEvent,
)


@dataclass
class FakeGpu:
    index: int
    name: str = "NVIDIA H100 80GB HBM3"
    utilization: tuple[int, int] = (97, 41)
    memory: tuple[int, int] = (71_303_168_000, 85_520_809_984)
    clocks: dict[str, int] = field(default_factory=lambda: {"sm": 1980, "mem": 2619})
    max_clocks: dict[str, int] = field(default_factory=lambda: {"sm": 1980, "mem": 2619})
    power_mw: int = 612_417
    power_limit_mw: int = 700_000
    temperature: float = 61.0
    temperature_slowdown: float = 87.0
    memory_temperature: float = 70.0
    clocks_event_reasons: int = 0x1  # GPU idle bit only
    ecc: dict[tuple[bool, bool], int] = field(
        default_factory=lambda: {
            (True, True): 0,
            (False, True): 0,
            (True, False): 3,
            (False, False): 0,
        }
    )
    remapped_rows: tuple[int, int, bool, bool] = (0, 0, False, False)
    pcie: tuple[int, int, int, int] = (5, 5, 16, 16)  # gen, gen max, width, width max
    pcie_replays: int = 0
    nvlinks: int = 18
    nvlink_errors: dict[str, int] = field(
        default_factory=lambda: {"crc_flit": 0, "crc_data": 0, "replay": 0, "recovery": 0}
    )
    unsupported: set[str] = field(
        default_factory=lambda: {"retired_pages", "retired_pages_pending"}
    )
    lost: bool = False
    field_answers: dict[int, FieldValue] = field(default_factory=dict)  # recorded, by field id

    @property
    def uuid(self) -> str:
        return f"GPU-5b4f1c2e-0000-4000-8000-00000000000{self.index}"

    @property
    def pci_bus_id(self) -> str:
        return (
            f"00000000:{[0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB][self.index % 8]:02X}:00.0"
        )


# Field id -> (the method that reads the same value on its own, its value on a FakeGpu)
_FIELDS: dict[int, tuple[str, Callable[[FakeGpu], FieldValue]]] = {
    fi.FI_ECC_SBE_VOL_TOTAL: ("ecc_errors", lambda gpu: gpu.ecc[(True, True)]),
    fi.FI_ECC_DBE_VOL_TOTAL: ("ecc_errors", lambda gpu: gpu.ecc[(False, True)]),
    fi.FI_ECC_SBE_AGG_TOTAL: ("ecc_errors", lambda gpu: gpu.ecc[(True, False)]),
    fi.FI_ECC_DBE_AGG_TOTAL: ("ecc_errors", lambda gpu: gpu.ecc[(False, False)]),
    fi.FI_RETIRED_SBE: ("retired_pages", lambda gpu: 0),
    fi.FI_RETIRED_DBE: ("retired_pages", lambda gpu: 0),
    fi.FI_RETIRED_PENDING: ("retired_pages_pending", lambda gpu: 0),
    fi.FI_MEMORY_TEMP: ("memory_temperature", lambda gpu: int(gpu.memory_temperature)),
    fi.FI_PCIE_REPLAY_COUNTER: ("pcie_replay_counter", lambda gpu: gpu.pcie_replays),
    fi.FI_REMAPPED_COR: ("remapped_rows", lambda gpu: gpu.remapped_rows[0]),
    fi.FI_REMAPPED_UNC: ("remapped_rows", lambda gpu: gpu.remapped_rows[1]),
    fi.FI_REMAPPED_PENDING: ("remapped_rows", lambda gpu: int(gpu.remapped_rows[2])),
    fi.FI_REMAPPED_FAILURE: ("remapped_rows", lambda gpu: int(gpu.remapped_rows[3])),
}


class FakeNvml:
    """See the module docstring."""

    def __init__(
        self, gpus: Sequence[FakeGpu], *, available: bool = True, call_cost_s: float = 0.0
    ) -> None:
        self.gpus = list(gpus)
        self.available = available
        self.call_cost_s = call_cost_s
        self.calls = 0
        self.xids: queue.Queue[XidEvent] = queue.Queue()
        self._registered: list[int] = []

    @classmethod
    def h100_node(cls, gpus: int = 8) -> FakeNvml:
        return cls([FakeGpu(index) for index in range(gpus)])

    def push_xid(self, gpu: int, xid: int) -> None:
        self.xids.put(XidEvent(gpu, xid))

    def _spend(self, calls: float = 1.0) -> None:
        self.calls += 1
        if self.call_cost_s:
            until = time.thread_time() + self.call_cost_s * calls
            while time.thread_time() < until:
                pass

    def _gpu(self, gpu: int, method: str, cost: float = 1.0) -> FakeGpu:
        self._spend(cost)
        state = self.gpus[gpu]
        if state.lost:
            raise NvmlGpuLost(f"GPU {gpu} is lost")
        if method in state.unsupported:
            raise NvmlNotSupported(method)
        return state

    def init(self) -> None:
        if not self.available:
            raise NvmlUnavailable("NVML Shared Library Not Found")

    def shutdown(self) -> None:
        pass

    def driver_version(self) -> str:
        self._spend()
        return "550.90.07"

    def device_count(self) -> int:
        return len(self.gpus)

    def uuid(self, gpu: int) -> str:
        return self._gpu(gpu, "uuid").uuid

    def serial(self, gpu: int) -> str:
        return f"165322{self._gpu(gpu, 'serial').index:07d}"

    def pci_bus_id(self, gpu: int) -> str:
        return self._gpu(gpu, "pci_bus_id").pci_bus_id

    def name(self, gpu: int) -> str:
        return self._gpu(gpu, "name").name

    def utilization(self, gpu: int) -> tuple[int, int]:
        return self._gpu(gpu, "utilization").utilization

    def memory(self, gpu: int) -> tuple[int, int]:
        return self._gpu(gpu, "memory").memory

    def clock_mhz(self, gpu: int, domain: ClockDomain, *, maximum: bool = False) -> int:
        state = self._gpu(gpu, "max_clock" if maximum else "clock")
        return (state.max_clocks if maximum else state.clocks)[domain]

    def power_mw(self, gpu: int) -> int:
        return self._gpu(gpu, "power_mw").power_mw

    def power_limit_mw(self, gpu: int) -> int:
        return self._gpu(gpu, "power_limit_mw").power_limit_mw

    def temperature(self, gpu: int) -> float:
        return self._gpu(gpu, "temperature").temperature

    def temperature_slowdown(self, gpu: int) -> float:
        return self._gpu(gpu, "temperature_slowdown").temperature_slowdown

    def memory_temperature(self, gpu: int) -> float:
        return self._gpu(gpu, "memory_temperature").memory_temperature

    def clocks_event_reasons(self, gpu: int) -> int:
        return self._gpu(gpu, "clocks_event_reasons").clocks_event_reasons

    def ecc_errors(self, gpu: int, *, corrected: bool, volatile: bool) -> int:
        return self._gpu(gpu, "ecc_errors").ecc[(corrected, volatile)]

    def retired_pages(self, gpu: int, *, double_bit: bool) -> int:
        self._gpu(gpu, "retired_pages")
        return 0

    def retired_pages_pending(self, gpu: int) -> bool:
        self._gpu(gpu, "retired_pages_pending")
        return False

    def remapped_rows(self, gpu: int) -> tuple[int, int, bool, bool]:
        return self._gpu(gpu, "remapped_rows").remapped_rows

    def pcie_link_gen(self, gpu: int, *, maximum: bool = False) -> int:
        return self._gpu(gpu, "pcie_link_gen").pcie[1 if maximum else 0]

    def pcie_link_width(self, gpu: int, *, maximum: bool = False) -> int:
        return self._gpu(gpu, "pcie_link_width").pcie[3 if maximum else 2]

    def pcie_replay_counter(self, gpu: int) -> int:
        return self._gpu(gpu, "pcie_replay_counter").pcie_replays

    def field_values(self, gpu: int, field_ids: Sequence[int]) -> list[FieldValue]:
        state = self._gpu(gpu, "field_values", 1 + 0.1 * len(field_ids))
        return [self._field_value(state, field_id) for field_id in field_ids]

    @staticmethod
    def _field_value(state: FakeGpu, field_id: int) -> FieldValue:
        if field_id in state.field_answers:
            return state.field_answers[field_id]
        if field_id not in _FIELDS:
            return None
        method, value = _FIELDS[field_id]
        return None if method in state.unsupported else value(state)

    def nvlink_max_links(self) -> int:
        return 18

    def nvlink_active(self, gpu: int, link: int) -> bool:
        state = self._gpu(gpu, "nvlink_active")
        if link >= state.nvlinks:
            raise NvmlNotSupported(f"link {link}")
        return True

    def nvlink_errors(self, gpu: int, link: int, counter: NvlinkCounter) -> int:
        return self._gpu(gpu, "nvlink_errors").nvlink_errors[counter]

    def register_xid_events(self, gpus: Sequence[int]) -> list[int]:
        self._registered = [
            g for g in gpus if "register_xid_events" not in self.gpus[g].unsupported
        ]
        return self._registered

    def wait_xid(self, timeout_ms: int) -> XidEvent | None:
        try:
            return self.xids.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            return None
