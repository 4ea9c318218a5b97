"""The GPU collector against the fake NVML: NotSupported, GpuIsLost, XID events, no driver.

No NVIDIA GPU or driver is available here, and the mock libnvidia-ml.so of
NVIDIA/k8s-test-infra could not be fetched (see the closing note of the collectors issue), so
the real pynvml path is exercised only as far as "no driver".
"""

from __future__ import annotations

import threading

import pytest

from reflex_localize.collectors.agent import Agent
from reflex_localize.collectors.base import FixedClock, HardwareAbsent
from reflex_localize.collectors.gpu import GpuCollector
from reflex_localize.collectors.nvml_api import NvmlUnavailable, PynvmlApi
from reflex_localize.collectors.nvml_fake import FakeNvml
from reflex_localize.schemas.codec import Point, encode

T0 = 1_700_000_000_000_000_000


def by_measurement(points: list[Point], name: str) -> list[Point]:
    return [p for p in points if p.measurement == name]


def test_healthy_h100_node() -> None:
    points = list(GpuCollector("c1", "n1", nvml=FakeNvml.h100_node(gpus=2)).collect(T0))
    gpus = by_measurement(points, "gpu")
    assert [p.tags["gpu"] for p in gpus] == ["0", "1"]
    assert gpus[0].tags["profile"] == "h100-sxm5-80gb"
    fields = gpus[0].fields
    assert fields["power_watts"] == 612.417 and fields["utilization_gpu_ratio"] == 0.97
    assert fields["nvlink_active_links"] == 18 and fields["remapped_rows_failure"] is False
    assert "retired_pages_sbe" not in fields, "Hopper has no page retirement: absent, not 0"
    info = by_measurement(points, "gpu_info")[0].fields
    assert info["name"] == "NVIDIA H100 80GB HBM3" and info["driver_version"] == "550.90.07"
    assert len(by_measurement(points, "gpu_nvlink")) == 2 * 18
    for point in points:
        encode(point)  # every point obeys the schema


def test_not_supported_fields_are_absent_not_zero() -> None:
    nvml = FakeNvml.h100_node(gpus=1)
    nvml.gpus[0].unsupported |= {"memory_temperature", "pcie_replay_counter", "ecc_errors"}
    (gpu,) = by_measurement(list(GpuCollector("c1", "n1", nvml=nvml).collect(T0)), "gpu")
    for absent in ("memory_temperature_celsius", "pcie_replay_errors", "ecc_corrected_volatile"):
        assert absent not in gpu.fields
    assert gpu.fields["temperature_celsius"] == 61.0


def test_gpu_without_nvlink() -> None:
    nvml = FakeNvml.h100_node(gpus=1)
    nvml.gpus[0].nvlinks = 0  # a PCIe card: NVML answers NotSupported for link 0
    points = list(GpuCollector("c1", "n1", nvml=nvml).collect(T0))
    assert not by_measurement(points, "gpu_nvlink")
    assert "nvlink_active_links" not in by_measurement(points, "gpu")[0].fields


def test_lost_gpu_gives_one_event_and_the_others_go_on() -> None:
    nvml = FakeNvml.h100_node(gpus=4)
    collector = GpuCollector("c1", "n1", nvml=nvml)
    list(collector.collect(T0))
    nvml.gpus[2].lost = True
    points = list(collector.collect(T0 + 10**9))
    assert [p.tags["gpu"] for p in by_measurement(points, "gpu")] == ["0", "1", "3"]
    (event,) = by_measurement(points, "event")
    assert event.tags["kind"] == "gpu_lost" and event.tags["source"] == "nvml"
    assert event.fields["gpu"] == 2 and event.fields["device"] == "00000000:3A:00.0"
    again = list(collector.collect(T0 + 2 * 10**9))
    assert not by_measurement(again, "event"), "one event per loss, not one per interval"
    nvml.gpus[2].lost = False
    back = list(collector.collect(T0 + 3 * 10**9))
    assert len(by_measurement(back, "gpu")) == 4


def test_gpu_lost_before_identity_is_known() -> None:
    nvml = FakeNvml.h100_node(gpus=1)
    nvml.gpus[0].lost = True
    (event,) = list(GpuCollector("c1", "n1", nvml=nvml).collect(T0))
    assert event.fields["gpu"] == 0 and "device" not in event.fields


def test_xid_event_is_emitted_at_once_from_its_thread() -> None:
    nvml = FakeNvml.h100_node(gpus=4)
    collector = GpuCollector("c1", "n1", nvml=nvml)
    list(collector.collect(T0))  # learns identities, so the event names the PCI bus id
    received: list[Point] = []
    arrived = threading.Event()

    def emit(points: list[Point]) -> None:
        received.extend(points)
        arrived.set()

    collector.start_background(emit)
    try:
        nvml.push_xid(gpu=3, xid=79)
        assert arrived.wait(5.0), "the XID must not wait for the next interval"
    finally:
        collector.stop_background()
    (event,) = received
    assert event.tags == {"cluster": "c1", "node": "n1", "source": "nvml", "kind": "xid"}
    assert event.fields["code"] == 79 and event.fields["gpu"] == 3
    assert event.fields["device"] == "00000000:5D:00.0"
    assert event.fields["message"] == "XID 79 on GPU 3: GPU has fallen off the bus"
    encode(event)


def test_no_driver_is_absent_and_a_successful_run() -> None:
    collector = GpuCollector("c1", "n1", nvml=FakeNvml([], available=False))
    with pytest.raises(HardwareAbsent):
        list(collector.collect(T0))
    agent = Agent([collector], lambda points: None, cluster="c1", node="n1", clock=FixedClock(T0))
    (metric,) = agent.run_once()
    assert metric.fields["success"] is True and metric.fields["points"] == 0
    collector.start_background(lambda points: None)  # no driver: no thread, no error
    collector.stop_background()


def test_real_pynvml_without_a_driver_reports_unavailable() -> None:
    api = PynvmlApi()
    try:
        api.init()
    except NvmlUnavailable:
        with pytest.raises(HardwareAbsent):
            list(GpuCollector("c1", "n1", nvml=PynvmlApi()).collect(T0))
    else:  # pragma: no cover - a machine with an NVIDIA driver
        points = list(GpuCollector("c1", "n1", nvml=api).collect(T0))
        assert by_measurement(points, "gpu")


# -- what a cycle costs (issue 39) -----------------------------------------------------------


def cycle_calls(collector: GpuCollector, nvml: FakeNvml, cycles: int) -> list[int]:
    calls = []
    for cycle in range(cycles):
        before = nvml.calls
        list(collector.collect(T0 + cycle * 10**9))
        calls.append(nvml.calls - before)
    return calls


def test_slow_counters_are_read_every_tenth_run_in_one_call() -> None:
    nvml = FakeNvml.h100_node(gpus=1)
    collector = GpuCollector("c1", "n1", nvml=nvml, nvlink_interval_s=3600, info_interval_s=3600)
    calls = cycle_calls(collector, nvml, 21)
    fast = calls[1]
    assert calls[1:10] == [fast] * 9 and calls[11:20] == [fast] * 9
    assert fast == 9, "utilization, memory, 2 clocks, power, its limit, 2 temperatures, reasons"
    # every 10th: one field-values call for 12 counters, 7 more values, 18 NVLink states
    assert calls[10] == calls[20] == fast + 1 + 7 + 18


def test_between_slow_reads_the_last_values_are_repeated() -> None:
    nvml = FakeNvml.h100_node(gpus=1)
    collector = GpuCollector("c1", "n1", nvml=nvml, slow_every=10)
    first = by_measurement(list(collector.collect(T0)), "gpu")[0].fields
    nvml.gpus[0].ecc[(False, True)] = 2  # an uncorrected error, counted by the driver
    nvml.gpus[0].clocks["sm"] = 900  # a fast value: seen at once
    later = [by_measurement(list(collector.collect(T0 + i * 10**9)), "gpu")[0].fields
             for i in range(1, 11)]  # fmt: skip
    assert all(set(fields) == set(first) for fields in later), "every point has every field"
    assert later[0]["sm_clock_mhz"] == 900 and later[0]["ecc_uncorrected_volatile"] == 0
    assert later[9]["ecc_uncorrected_volatile"] == 2, "within 10 runs"


def test_batched_and_one_by_one_reads_agree() -> None:
    """The same GPU read through field values and through one call per value; a driver
    without nvmlDeviceGetFieldValues gets the second."""
    batched = FakeNvml.h100_node(gpus=1)
    old_driver = FakeNvml.h100_node(gpus=1)
    old_driver.gpus[0].unsupported.add("field_values")
    old_driver.gpus[0].unsupported.add("memory_temperature")  # a field value too
    for nvml in (batched, old_driver):
        nvml.gpus[0].remapped_rows = (3, 0, True, False)
        nvml.gpus[0].pcie_replays = 7
    (a,) = by_measurement(list(GpuCollector("c1", "n1", nvml=batched).collect(T0)), "gpu")
    (b,) = by_measurement(list(GpuCollector("c1", "n1", nvml=old_driver).collect(T0)), "gpu")
    fields = dict(a.fields)
    assert fields.pop("memory_temperature_celsius") == 70.0
    assert fields == b.fields
    assert b.fields["remapped_rows_pending"] is True and b.fields["pcie_replay_errors"] == 7
    assert "retired_pages_sbe" not in a.fields, "not supported: absent in both ways"


def test_the_agent_reports_cpu_time_per_run() -> None:
    nvml = FakeNvml.h100_node(gpus=2)
    nvml.call_cost_s = 0.0002  # each NVML call spends CPU, as an ioctl does
    agent = Agent([GpuCollector("c1", "n1", nvml=nvml)], lambda points: None,
                  cluster="c1", node="n1")  # fmt: skip
    (metric,) = [p for p in agent.run_once() if p.measurement == "reflex_collector"]
    cpu = float(metric.fields["cpu_seconds"])
    assert cpu >= nvml.calls * 0.0002 * 0.9
    assert agent.states[0].cpu_seconds == cpu


def test_field_values_decode_what_nvml_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """PynvmlApi.field_values on nvidia-ml-py's own structures (no driver needed): each
    answer by its value type, NOT_SUPPORTED as None, a lost GPU raised, a driver without the
    call as NvmlNotSupported (the collector then reads one value per call)."""
    pynvml = pytest.importorskip("pynvml")
    from reflex_localize.collectors.nvml_api import NvmlGpuLost, NvmlNotSupported

    returns = [pynvml.NVML_SUCCESS, pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_SUCCESS,
               pynvml.NVML_SUCCESS]  # fmt: skip

    def answers(handle: object, field_ids: list[int]) -> object:
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for value, field_id, answer in zip(values, field_ids, returns, strict=True):
            value.fieldId, value.nvmlReturn = field_id, answer
        values[0].valueType, values[0].value.ullVal = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, 7
        values[2].valueType, values[2].value.uiVal = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, 65
        values[3].valueType, values[3].value.dVal = pynvml.NVML_VALUE_TYPE_DOUBLE, 1.5
        return values

    monkeypatch.setattr(pynvml, "nvmlDeviceGetHandleByIndex", lambda index: object())
    monkeypatch.setattr(pynvml, "nvmlDeviceGetFieldValues", answers)
    api = PynvmlApi()
    api._nv = pynvml
    assert api.field_values(0, [3, 29, 82, 185]) == [7, None, 65, 1.5]
    returns[0] = pynvml.NVML_ERROR_GPU_IS_LOST
    with pytest.raises(NvmlGpuLost):
        api.field_values(0, [3, 29, 82, 185])

    def old_driver(handle: object, field_ids: list[int]) -> object:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlDeviceGetFieldValues", old_driver)
    with pytest.raises(NvmlNotSupported):
        api.field_values(0, [3])
