"""NVML's answers recorded on a real GPU, and a fake NVML that gives them back.

A recording is JSON: where it came from, the driver version, and per GPU what each method of
:class:`collectors.nvml_api.Nvml` answered, ``"NOT_SUPPORTED"`` where NVML said so (tuples as
lists; the field values by field id). :func:`record` makes one from any NVML (the real one in
``benchmarks/real_gpu_check.py --record-nvml``), :func:`replay` turns one into a
:class:`~collectors.nvml_fake.FakeNvml`, so the collector's tests run against what a real
driver said (tests/fixtures/nvml/).

>>> from reflex_localize.collectors.nvml_fake import FakeNvml
>>> recording = record(FakeNvml.h100_node(gpus=1), source="the fake")
>>> recording["gpus"][0]["retired_pages"], recording["gpus"][0]["clock_mhz"]
('NOT_SUPPORTED', {'sm': 1980, 'mem': 2619})
>>> replay(recording).clock_mhz(0, "sm")
1980
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reflex_localize.collectors import nvml_api as fi
from reflex_localize.collectors.nvml_api import FieldValue, Nvml, NvmlNotSupported
from reflex_localize.collectors.nvml_fake import FakeGpu, FakeNvml

NOT_SUPPORTED = "NOT_SUPPORTED"
RECORDED_FIELDS = (
    fi.FI_ECC_SBE_VOL_TOTAL, fi.FI_ECC_DBE_VOL_TOTAL, fi.FI_ECC_SBE_AGG_TOTAL,
    fi.FI_ECC_DBE_AGG_TOTAL, fi.FI_RETIRED_SBE, fi.FI_RETIRED_DBE, fi.FI_RETIRED_PENDING,
    fi.FI_MEMORY_TEMP, fi.FI_PCIE_REPLAY_COUNTER, fi.FI_REMAPPED_COR, fi.FI_REMAPPED_UNC,
    fi.FI_REMAPPED_PENDING, fi.FI_REMAPPED_FAILURE,
)  # fmt: skip
_ECC = {"corrected_volatile": (True, True), "uncorrected_volatile": (False, True),
        "corrected_aggregate": (True, False), "uncorrected_aggregate": (False, False)}  # fmt: skip


def _answer(call: Callable[[], Any]) -> Any:
    try:
        value = call()
    except NvmlNotSupported:
        return NOT_SUPPORTED
    return list(value) if isinstance(value, tuple) else value


def _each(**calls: Callable[[], Any]) -> Any:
    """A dict of answers, or NOT_SUPPORTED when any of them is (the fake's unit is the method)."""
    answers = {name: _answer(call) for name, call in calls.items()}
    return NOT_SUPPORTED if NOT_SUPPORTED in answers.values() else answers


def record(nvml: Nvml, *, source: str) -> dict[str, Any]:
    """What ``nvml`` answers for every GPU, every method once."""
    nvml.init()
    gpus = [_record_gpu(nvml, gpu) for gpu in range(nvml.device_count())]
    return {"source": source, "driver_version": _answer(nvml.driver_version), "gpus": gpus}


def _record_gpu(nvml: Nvml, gpu: int) -> dict[str, Any]:
    links = range(nvml.nvlink_max_links())
    fields = _answer(lambda: nvml.field_values(gpu, RECORDED_FIELDS))
    return {
        "name": _answer(lambda: nvml.name(gpu)),
        "uuid": _answer(lambda: nvml.uuid(gpu)),
        "serial": _answer(lambda: nvml.serial(gpu)),
        "pci_bus_id": _answer(lambda: nvml.pci_bus_id(gpu)),
        "utilization": _answer(lambda: nvml.utilization(gpu)),
        "memory": _answer(lambda: nvml.memory(gpu)),
        "clock_mhz": _each(
            sm=lambda: nvml.clock_mhz(gpu, "sm"), mem=lambda: nvml.clock_mhz(gpu, "mem")
        ),
        "max_clock_mhz": _each(
            sm=lambda: nvml.clock_mhz(gpu, "sm", maximum=True),
            mem=lambda: nvml.clock_mhz(gpu, "mem", maximum=True),
        ),
        "power_mw": _answer(lambda: nvml.power_mw(gpu)),
        "power_limit_mw": _answer(lambda: nvml.power_limit_mw(gpu)),
        "temperature": _answer(lambda: nvml.temperature(gpu)),
        "temperature_slowdown": _answer(lambda: nvml.temperature_slowdown(gpu)),
        "memory_temperature": _answer(lambda: nvml.memory_temperature(gpu)),
        "clocks_event_reasons": _answer(lambda: nvml.clocks_event_reasons(gpu)),
        "ecc_errors": _each(**{name: _ecc(nvml, gpu, *flags) for name, flags in _ECC.items()}),
        "retired_pages": _each(
            sbe=lambda: nvml.retired_pages(gpu, double_bit=False),
            dbe=lambda: nvml.retired_pages(gpu, double_bit=True),
        ),
        "retired_pages_pending": _answer(lambda: nvml.retired_pages_pending(gpu)),
        "remapped_rows": _answer(lambda: nvml.remapped_rows(gpu)),
        "pcie_link_gen": _each(
            current=lambda: nvml.pcie_link_gen(gpu),
            max=lambda: nvml.pcie_link_gen(gpu, maximum=True),
        ),
        "pcie_link_width": _each(
            current=lambda: nvml.pcie_link_width(gpu),
            max=lambda: nvml.pcie_link_width(gpu, maximum=True),
        ),
        "pcie_replay_counter": _answer(lambda: nvml.pcie_replay_counter(gpu)),
        "nvlinks": sum(_answer(_link(nvml, gpu, link)) != NOT_SUPPORTED for link in links),
        "field_values": fields if fields == NOT_SUPPORTED else {
            str(field): NOT_SUPPORTED if value is None else value
            for field, value in zip(RECORDED_FIELDS, fields, strict=True)
        },
    }  # fmt: skip


def _ecc(nvml: Nvml, gpu: int, corrected: bool, volatile: bool) -> Callable[[], int]:
    return lambda: nvml.ecc_errors(gpu, corrected=corrected, volatile=volatile)


def _link(nvml: Nvml, gpu: int, link: int) -> Callable[[], bool]:
    return lambda: nvml.nvlink_active(gpu, link)


class RecordedNvml(FakeNvml):
    """A :class:`FakeNvml` that also gives back the recorded identity and driver version."""

    def __init__(self, gpus: list[FakeGpu], recording: dict[str, Any]) -> None:
        super().__init__(gpus)
        self.recording = recording

    def _identity(self, gpu: int, key: str) -> str:
        self._gpu(gpu, key)
        return str(self.recording["gpus"][gpu][key])

    def driver_version(self) -> str:
        version = self.recording["driver_version"]
        if version == NOT_SUPPORTED:
            raise NvmlNotSupported("driver_version")
        return str(version)

    def uuid(self, gpu: int) -> str:
        return self._identity(gpu, "uuid")

    def serial(self, gpu: int) -> str:
        return self._identity(gpu, "serial")

    def pci_bus_id(self, gpu: int) -> str:
        return self._identity(gpu, "pci_bus_id")


def replay(recording: dict[str, Any]) -> RecordedNvml:
    """The fake NVML that answers as the recording says."""
    return RecordedNvml([_gpu(index, answers) for index, answers in
                         enumerate(recording["gpus"])], recording)  # fmt: skip


def load(path: Path) -> RecordedNvml:
    return replay(json.loads(path.read_text()))


# recording key -> the FakeNvml method its NOT_SUPPORTED stands for, where the names differ
_METHODS = {"clock_mhz": "clock", "max_clock_mhz": "max_clock"}


def _gpu(index: int, answers: dict[str, Any]) -> FakeGpu:
    state = FakeGpu(index, unsupported=set())
    for key, answer in answers.items():
        if answer == NOT_SUPPORTED:
            state.unsupported.add(_METHODS.get(key, key))
    given = {key: answer for key, answer in answers.items() if answer != NOT_SUPPORTED}
    simple = ("name", "power_mw", "power_limit_mw", "temperature", "temperature_slowdown",
              "memory_temperature", "clocks_event_reasons", "nvlinks")  # fmt: skip
    for key in simple:
        if key in given:
            setattr(state, key, given[key])
    for key in ("utilization", "memory", "remapped_rows"):
        if key in given:
            setattr(state, key, tuple(given[key]))
    if "clock_mhz" in given:
        state.clocks = dict(given["clock_mhz"])
    if "max_clock_mhz" in given:
        state.max_clocks = dict(given["max_clock_mhz"])
    if "ecc_errors" in given:
        state.ecc = {flags: given["ecc_errors"][name] for name, flags in _ECC.items()}
    gen, width = given.get("pcie_link_gen"), given.get("pcie_link_width")
    if gen and width:
        state.pcie = (gen["current"], gen["max"], width["current"], width["max"])
    if "pcie_replay_counter" in given:
        state.pcie_replays = given["pcie_replay_counter"]
    if "field_values" in given:
        state.field_answers = {int(field): _field(value)
                               for field, value in given["field_values"].items()}  # fmt: skip
    return state


def _field(value: Any) -> FieldValue:
    return None if value == NOT_SUPPORTED else value
