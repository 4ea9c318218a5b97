"""The GPU collector against NVML answers recorded on real GPUs (tests/fixtures/nvml/*.json).

The one fixture so far is TRANSCRIBED from issue 39's report of an H200 (driver 580.159.04),
not captured: its ``provenance`` says which values the issue states and which are assumed.
``benchmarks/real_gpu_check.py --record-nvml FILE`` writes a captured one to put beside it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reflex_localize.collectors.gpu import GpuCollector
from reflex_localize.collectors.nvml_recorded import NOT_SUPPORTED, load, record, replay
from reflex_localize.schemas.codec import Point, encode

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "nvml").glob("*.json"))
T0 = 1_700_000_000_000_000_000
# GpuSample fields -> the recording's answer that leaves them absent when NOT_SUPPORTED
ABSENT_WHEN = {
    "retired_pages_sbe": "retired_pages",
    "retired_pages_dbe": "retired_pages",
    "retired_pages_pending": "retired_pages_pending",
    "memory_temperature_celsius": "memory_temperature",
    "remapped_rows_pending": "remapped_rows",
    "ecc_corrected_volatile": "ecc_errors",
    "pcie_link_gen": "pcie_link_gen",
    "sm_clock_mhz": "clock_mhz",
    "power_watts": "power_mw",
}


def collected(path: Path) -> list[Point]:
    collector = GpuCollector("c1", "n1", nvml=load(path))
    return [point for cycle in range(12) for point in collector.collect(T0 + cycle * 10**9)]


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_every_point_obeys_the_schema_and_unsupported_is_absent(path: Path) -> None:
    recording = json.loads(path.read_text())
    points = collected(path)
    for point in points:
        encode(point)
    gpus = [p for p in points if p.measurement == "gpu"]
    assert len(gpus) == 12 * len(recording["gpus"])
    for point in gpus:
        answers = recording["gpus"][int(point.tags["gpu"])]
        for field_name, answer in ABSENT_WHEN.items():
            assert (field_name in point.fields) == (answers[answer] != NOT_SUPPORTED), field_name
    links = sum(gpu["nvlinks"] for gpu in recording["gpus"])
    assert len([p for p in points if p.measurement == "gpu_nvlink"]) == 2 * links  # T0, T0+10s


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_a_recording_replays_as_recorded(path: Path) -> None:
    recording = json.loads(path.read_text())
    again = record(replay(recording), source=recording["source"])
    assert again["gpus"] == recording["gpus"]
    assert again["driver_version"] == recording["driver_version"]


def test_the_h200_of_issue_39() -> None:
    """What the issue says the agent read: 690 W, about 1,500 MHz under load, no NVLink."""
    points = collected(Path(__file__).parent / "fixtures/nvml/h200-issue39-transcribed.json")
    gpu: dict[str, Any] = dict(next(p for p in points if p.measurement == "gpu").fields)
    assert gpu["power_watts"] == 690.0 and gpu["sm_clock_mhz"] == 1500
    assert gpu["pcie_link_gen"] == 5 and gpu["pcie_link_width"] == 16
    assert gpu["remapped_rows_failure"] is False and "nvlink_active_links" not in gpu
    info = next(p for p in points if p.measurement == "gpu_info")
    assert info.tags["profile"] == "h200-sxm-141gb"
    assert info.fields["driver_version"] == "580.159.04"


def test_a_driver_without_field_values_is_read_one_call_at_a_time(tmp_path: Path) -> None:
    path = Path(__file__).parent / "fixtures/nvml/h200-issue39-transcribed.json"
    recording = json.loads(path.read_text())
    recording["gpus"][0]["field_values"] = NOT_SUPPORTED
    old = tmp_path / "old-driver.json"
    old.write_text(json.dumps(recording))
    new_fields = next(p.fields for p in collected(path) if p.measurement == "gpu")
    old_fields = next(p.fields for p in collected(old) if p.measurement == "gpu")
    assert old_fields == new_fields
