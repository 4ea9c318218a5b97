"""The simulator obeys the schema and its own promises: valid frames, one field set per frame,
fast line protocol identical to the codec's, determinism, counters that never go back."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from reflex_localize.schemas.codec import decode, encode
from reflex_localize.schemas.contract import load_schema
from reflex_localize.schemas.frame import Frame, validate_frame
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.simulator import Simulation, load_scenario, scale_scenario, scenario_names

MEASUREMENTS = {"gpu", "gpu_info", "gpu_nvlink", "host", "nic", "ib_port", "event", "train_step",
                "job_membership"}  # fmt: skip
COUNTERS = {
    (spec.measurement, spec.name)
    for m in load_schema().measurements.values()
    for spec in m.fields.values()
    if spec.kind == "counter"
}


def frames_of(scenario: str, seed: int = 5, seconds: float = 10.0) -> list[list[Frame]]:
    return list(Simulation(load_scenario(scenario), seed=seed).chunks(seconds=seconds))


@pytest.mark.parametrize("scenario", ["demo", "benign_fleet", "fault_pfc_storm", "fault_xid95"])
def test_every_frame_obeys_the_schema(scenario: str) -> None:
    seen = set()
    for chunk in frames_of(scenario):
        for frame in chunk:
            _, bad = validate_frame(frame)
            assert not bad, (frame.measurement, bad[:3])
            seen.add(frame.measurement)
            for column in frame.tags.values():
                assert column.dtype == object
            for column in frame.fields.values():
                assert column.dtype.kind in "fiOb" and column.dtype.itemsize in (1, 8)
                assert column.shape == frame.time_ns.shape
    # Benign runs may log no event at all (corrected machine checks are rare).
    assert MEASUREMENTS - {"event"} <= seen <= MEASUREMENTS


def test_chunks_are_in_time_order_and_cover_their_window() -> None:
    sim = Simulation(load_scenario("fault_xid79"), seed=2)
    for number, chunk in enumerate(sim.chunks(seconds=30.0)):
        first = sim.start_ns + number * 30 * 10**9
        for frame in chunk:
            assert frame.time_ns.min() >= first and frame.time_ns.max() < first + 30 * 10**9


def test_fast_line_protocol_equals_the_codec() -> None:
    [chunk] = frames_of("fault_xid79", seconds=720)[-1:]
    sample = [f.take(np.arange(0, len(f), max(1, len(f) // 50))) for f in chunk]
    for frame in sample:
        lines = encode_frame(frame)
        assert lines == [encode(p) for p in frame.points()]
        assert [decode(line) for line in lines[:5]] == [
            decode(encode(p)) for p in list(frame.points())[:5]
        ]


def test_same_seed_same_frames_other_seed_other_frames() -> None:
    def digest(seed: int) -> list[tuple]:
        out = []
        for chunk in frames_of("demo", seed=seed, seconds=60):
            for f in chunk:
                out.append((f.measurement, len(f), f.time_ns.sum(), *(
                    float(np.asarray(c, dtype=float).sum()) for k, c in f.fields.items()
                    if c.dtype.kind != "O")))  # fmt: skip
        return out

    assert digest(3) == digest(3)
    assert digest(3) != digest(4)
    assert (
        Simulation(load_scenario("mixture"), 9).truth
        == Simulation(load_scenario("mixture"), 9).truth
    )


def test_counters_are_cumulative_and_never_go_back() -> None:
    last: dict[tuple[str, str, tuple], int] = {}
    for chunk in frames_of("benign_busy", seconds=60):
        for frame in chunk:
            keys = list(zip(*frame.tags.values(), strict=True))
            for name, column in frame.fields.items():
                if (frame.measurement, name) not in COUNTERS:
                    continue
                for key, value in zip(keys, column.tolist(), strict=True):
                    previous = last.get((frame.measurement, name, key), 0)
                    assert value >= previous, (frame.measurement, name, key)
                    last[(frame.measurement, name, key)] = value


def test_membership_describes_every_rank() -> None:
    sim = Simulation(load_scenario("demo"), seed=1)
    chunk = next(iter(sim.chunks(seconds=10.0)))
    [membership_a, membership_b] = [f for f in chunk if f.measurement == "job_membership"]
    job = sim.cluster.jobs[0]
    assert len(membership_a) == job.world_size == job.dp * job.pp * job.tp
    assert (membership_a.fields["pp_size"] == job.pp).all()
    assert set(membership_b.fields["profile"]) == {"h100-sxm5-80gb", "a100-sxm4-80gb"}


def test_chunk_length_must_be_whole_seconds() -> None:
    with pytest.raises(ValueError):
        next(iter(Simulation(load_scenario("demo")).chunks(seconds=2.5)))


def test_every_library_scenario_loads() -> None:
    for name in scenario_names():
        sim = Simulation(load_scenario(name), seed=0)
        assert sim.truth and all(label.onset_ns >= sim.start_ns for label in sim.truth)
        faults = [label for label in sim.truth if label.fault_type != "none"]
        assert all(label.onset_ns >= sim.start_ns + 240 * 10**9 for label in faults)


def test_scale_to_ten_thousand_gpus() -> None:
    scenario = scale_scenario(load_scenario("mixture"), 10_000)
    sim = Simulation(scenario, seed=1)
    assert 9_992 <= sim.cluster.gpu_count <= 10_000
    assert len(sim.truth) == scenario.mixture_faults
    chunk = next(iter(sim.chunks(seconds=5.0)))
    gpu_rows = sum(len(f) for f in chunk if f.measurement == "gpu")
    assert gpu_rows == 5 * sim.cluster.gpu_count


def test_write_truth(tmp_path: Path) -> None:
    sim = Simulation(load_scenario("demo"), seed=7)
    sim.write_truth(tmp_path / "truth.json")
    document = json.loads((tmp_path / "truth.json").read_text())
    assert [f["fault_type"] for f in document["faults"]] == [
        "xid79", "fail_slow_gpu", "pipeline_imbalance", "compound_benign"
    ]  # fmt: skip
    assert {f["expect"] for f in document["faults"]} == {"hardware", "no_hardware_fault"}
    assert document["quirks"] and document["seed"] == 7
