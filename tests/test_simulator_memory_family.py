"""The memory_matters family carries what it claims (simulator/scenarios/families/README.md).

No verdict of Reflex is asserted here: these tests read the simulated telemetry and the truth.
A GPU that drifts looks like the fleet's binned parts and unlike its own past; a fault from job
b's first step sits on a node that was healthy in job a; a recurrence in job b is short and
mild; small jobs give the drifting node no same-stage peer; the compound node carries every
piece that other nodes carry one of. The simulator's new pieces (``gpu_clock_drift``,
``node_clock_drift``, ``spare`` for the counted quirks, the single-anomaly ``[[benign]]`` kinds,
the knobs of ``compound_benign`` and ``fail_slow_gpu``) are off unless a scenario asks.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from reflex_localize.schemas.frame import Frame, validate_frame
from reflex_localize.simulator import FaultLabel, Simulation, family_scenarios, load_scenario
from reflex_localize.simulator.effects import Episode
from reflex_localize.simulator.scenario import ScenarioError, parse_scenario
from reflex_localize.simulator.tables import concat_frames

FAMILY = "memory_matters"
ALL = family_scenarios(FAMILY)


def named(stem: str) -> Path:
    [path] = [p for p in ALL if p.stem == stem]
    return path


@cache
def run(path: Path, without_faults: bool = False) -> tuple[Simulation, dict[str, Frame]]:
    """The simulation at seed 7 and one table per measurement (events left out); the same run
    without the scenario's faults when asked (the same noise: faults draw nothing here)."""
    scenario = load_scenario(path)
    if without_faults:
        scenario = dataclasses.replace(scenario, faults=())
    sim = Simulation(scenario, seed=7)
    frames: dict[str, list[Frame]] = defaultdict(list)
    for chunk in sim.chunks(seconds=10.0):
        for frame in chunk:
            frames[frame.measurement].append(frame)
    tables = {m: concat_frames(group) for m, group in frames.items() if m != "train_step"}
    for job in sim.cluster.jobs:
        tables[f"train_step/{job.name}"] = concat_frames(
            f for f in frames["train_step"] if f.tags["job"][0] == job.name
        )
    return sim, tables


def seconds(sim: Simulation, table: Frame) -> np.ndarray:
    return (table.time_ns - sim.start_ns) / 1e9


def gpu_median(sim: Simulation, gpu: Frame, field: str, where: np.ndarray, span: tuple) -> float:
    at = seconds(sim, gpu)
    busy = gpu.fields["utilization_gpu_ratio"] > 0.5
    rows = where & busy & (at >= span[0]) & (at < span[1])
    assert rows.any(), (field, span)
    return float(np.median(gpu.fields[field][rows]))


def rank_compute(sim: Simulation, table: Frame, rank: str, span: tuple) -> float:
    at = seconds(sim, table)
    rows = (table.tags["rank"] == rank) & (at >= span[0]) & (at < span[1])
    return float(np.median(table.fields["compute_seconds"][rows]))


def onset_s(sim: Simulation, label: FaultLabel) -> float:
    return (label.onset_ns - sim.start_ns) / 1e9


# ---- the family -----------------------------------------------------------------------------


def test_the_family_has_its_layouts_steps_benign_runs_and_a_control() -> None:
    scenarios = [load_scenario(path) for path in ALL]
    assert 8 <= len(scenarios) <= 12
    assert all(s.name.startswith("mm_") for s in scenarios)
    assert len({s.name for s in scenarios}) == len(scenarios)
    assert sum(not s.faults for s in scenarios) >= 2
    assert sum(bool(s.evaluation.control_of) for s in scenarios) >= 1
    layouts = {(job.nodes, job.pp) for s in scenarios for job in s.jobs}
    assert len(layouts) >= 6
    step_s = [job.step_s for s in scenarios for job in s.jobs]
    assert min(step_s) <= 2.0 and max(step_s) >= 44.0
    dp = {job.nodes * 8 // (job.tp * job.pp) for s in scenarios for job in s.jobs if s.faults}
    assert {1, 2} <= dp


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_every_scenario_obeys_the_schema_and_labels_a_node_of_its_job(path: Path) -> None:
    sim, tables = run(path)
    for name, table in tables.items():
        assert not validate_frame(table)[1], name
    jobs = {job.name: job for job in sim.cluster.jobs}
    for label in sim.truth:
        if label.fault_type == "none":
            assert not load_scenario(path).faults
            continue
        assert label.expect == "hardware" and label.node in jobs[label.job].nodes
        job = jobs[label.job]
        # The onset avoids the job's checkpoints (every 300 s from its start, 12 s each).
        since = (onset_s(sim, label) - job.start_s) % job.config.checkpoint_every_s
        assert (since == 0 and onset_s(sim, label) == job.start_s) or since >= 15


# ---- a drift that looks like a binned part --------------------------------------------------


@pytest.mark.parametrize(
    ("stem", "gpu"), [("drift_among_binned_12n_8s", 5), ("gpu_drift_from_job_b_start_2s", 2)]
)
def test_the_drifting_gpu_sits_inside_the_binned_band_and_below_its_own_past(
    stem: str, gpu: int
) -> None:
    sim, tables = run(named(stem))
    [label] = sim.truth
    gpus = tables["gpu"]
    start = onset_s(sim, label)
    mine = (gpus.tags["node"] == label.node) & (gpus.tags["gpu"] == str(gpu))
    binned = np.zeros(len(mine), dtype=bool)
    slow = [q for q in sim.quirks if q.kind == "slow_clock_gpu"]
    assert len(slow) >= sim.cluster.gpu_count // 4  # a quarter to a third of the fleet
    assert label.node not in {q.node for q in sim.quirks}
    job = next(j for j in sim.cluster.jobs if j.name == label.job)
    slow = [q for q in slow if q.node in job.nodes]  # its peers in its job
    assert len(slow) >= 4
    for quirk in slow:
        binned |= (gpus.tags["node"] == quirk.node) & (gpus.tags["gpu"] == quirk.index)
    after = (start + 30, start + 600)
    now = gpu_median(sim, gpus, "sm_clock_mhz", mine, after)
    band = [gpu_median(sim, gpus, "sm_clock_mhz", binned & (gpus.tags["gpu"] == q.index)
                       & (gpus.tags["node"] == q.node), after) for q in slow]  # fmt: skip
    before = gpu_median(sim, gpus, "sm_clock_mhz", mine, (10, start))
    assert min(band) <= now <= max(band)
    assert 0.96 <= now / before <= 0.98
    at = seconds(sim, gpus)
    assert not gpus.fields["clocks_event_reasons"][mine & (at >= start)].any()
    power = gpu_median(sim, gpus, "power_watts", mine, after)
    assert abs(power / gpu_median(sim, gpus, "power_watts", mine, (10, start)) - 1) < 0.01


def test_a_fault_from_job_b_start_is_on_a_node_healthy_throughout_job_a() -> None:
    for stem in ("gpu_drift_from_job_b_start_2s", "node_drift_from_job_b_start_47s"):
        sim, tables = run(named(stem))
        [label] = sim.truth
        a, b = sim.cluster.jobs[0], sim.cluster.jobs[1]
        assert label.job == b.name and label.node in a.nodes and label.node in b.nodes
        assert a.end_s < b.start_s and onset_s(sim, label) == b.start_s
        gpus = tables["gpu"]
        node = gpus.tags["node"] == label.node
        index = label.index or "0"
        in_a = gpu_median(sim, gpus, "sm_clock_mhz", node & (gpus.tags["gpu"] == index),
                          (a.start_s + 10, a.end_s))  # fmt: skip
        in_b = gpu_median(sim, gpus, "sm_clock_mhz", node & (gpus.tags["gpu"] == index),
                          (b.start_s, b.start_s + 60))  # fmt: skip
        assert in_a >= 1940 and in_b <= 0.975 * in_a, (stem, in_a, in_b)


def test_a_node_drift_moves_every_gpu_of_the_node_and_the_heat_with_it() -> None:
    sim, tables = run(named("node_drift_from_job_b_start_47s"))
    [label] = sim.truth
    gpus = tables["gpu"]
    node = gpus.tags["node"] == label.node
    a, b = sim.cluster.jobs[0], sim.cluster.jobs[1]
    for gpu in map(str, range(8)):
        mine = node & (gpus.tags["gpu"] == gpu)
        span_a, span_b = (a.start_s + 60, a.end_s), (b.start_s + 60, b.end_s)
        clock = gpu_median(sim, gpus, "sm_clock_mhz", mine, span_b) / gpu_median(
            sim, gpus, "sm_clock_mhz", mine, span_a
        )
        heat = gpu_median(sim, gpus, "temperature_celsius", mine, span_b) - gpu_median(
            sim, gpus, "temperature_celsius", mine, span_a
        )
        assert 0.96 <= clock <= 0.97 and 5 <= heat <= 7, (gpu, clock, heat)


# ---- a recurrence in job b ------------------------------------------------------------------


def test_the_recurrence_in_job_b_is_short_and_mild_and_the_control_differs_only_in_a() -> None:
    sim, tables = run(named("recurring_fail_slow_moves_25s"))
    bursts = [label for label in sim.truth if label.job == "a"]
    [recurrence] = [label for label in sim.truth if label.job == "b"]
    assert len(bursts) == 2 and {label.node for label in sim.truth} == {"node-0006"}
    assert (recurrence.end_ns - recurrence.onset_ns) / 1e9 <= 3 * 25
    steps = tables["train_step/b"]
    start = onset_s(sim, recurrence)
    job = sim.cluster.jobs[1]
    rank = str(int(np.flatnonzero(job.rank_gpu == 5 * 8 + 1)[0]))  # node-0006 gpu 1
    slowed = rank_compute(sim, steps, rank, (start + 20, start + 75)) / rank_compute(
        sim, steps, rank, (job.start_s, start)
    )
    assert 1.03 <= slowed <= 1.10
    control_sim, _ = run(named("recurring_fail_slow_moves_25s_control"))
    control = load_scenario(named("recurring_fail_slow_moves_25s_control"))
    assert control.evaluation.control_of == sim.scenario.name
    assert [f for f in sim.scenario.faults if f.job == "b"] == list(control.faults)
    assert [lbl.onset_ns for lbl in control_sim.truth] == [recurrence.onset_ns]


# ---- small jobs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stem", "low", "high"),
    [("solo_node_drift_2s", 1.04, 1.06), ("pipe_pp2_node_drift_47s", 1.03, 1.05)],
)
def test_a_small_job_gives_the_drifting_node_no_same_stage_peer(
    stem: str, low: float, high: float
) -> None:
    sim, tables = run(named(stem))
    [label] = sim.truth
    job = next(j for j in sim.cluster.jobs if j.name == label.job)
    assert len(job.nodes) <= 2 and job.dp == 1
    start = onset_s(sim, label)
    steps = tables[f"train_step/{job.name}"]
    at = seconds(sim, steps)
    mine = steps.tags["node"] == label.node
    compute = steps.fields["compute_seconds"]
    if len(job.nodes) == 2:
        # A dp=1 job's steps vary by a few % with their batches, every rank alike: read the
        # node's compute against the other stage's in the same step (x1.06 before the drift).
        other = np.array([np.median(compute[~mine & (steps.fields["step"] == n)])
                          for n in steps.fields["step"]])  # fmt: skip
        compute = compute / other
    before = mine & (at >= 60) & (at < start)
    after = mine & (at >= start + 60) & (at < start + 600)
    ratio = np.median(compute[after]) / np.median(compute[before])
    assert low <= ratio <= high, ratio  # and every GPU of the node alike:
    gpus = tables["gpu"]
    node = gpus.tags["node"] == label.node
    drops = [gpu_median(sim, gpus, "sm_clock_mhz", node & (gpus.tags["gpu"] == g),
                        (start + 60, start + 600)) for g in map(str, range(8))]  # fmt: skip
    assert max(drops) - min(drops) <= 3


# ---- a compound of pieces that are each common ----------------------------------------------

PIECES = {"ecc_corrected", "pcie_replay", "throttle", "symbol_error", "psi_cpu"}


def _fault_episodes(sim: Simulation, level: str) -> list[Episode]:
    """The episodes of the scenario's faults (not background, quirks or [[benign]])."""
    background = {id(e) for e in sim.background_episodes}
    return [e for e in sim.episodes[level].episodes if id(e) not in background]


def _pieces_by_node(sim: Simulation, episodes: list[Episode]) -> dict[str, set[str]]:
    per_node = sim.cluster.gpus_per_node
    found: dict[str, set[str]] = defaultdict(set)
    for episode in episodes:
        if episode.effect not in PIECES:
            continue
        for entity in episode.entities:
            node = int(entity) if episode.level == "host" else int(entity) // per_node
            found[sim.cluster.nodes[node].name].add(episode.effect)
    return found


def test_the_compound_node_carries_every_piece_other_nodes_carry_one_of() -> None:
    sim, tables = run(named("compound_among_single_anomalies_8s"))
    [label] = sim.truth
    assert label.fault_type == "compound_benign" and label.component == "node"
    assert not sim.quirks
    scheduled = _pieces_by_node(sim, [e for e in sim.background_episodes
                                      if e.start_s == 0 or e.end_s - e.start_s >= 5])  # fmt: skip
    faulty = _pieces_by_node(
        sim, [e for level in sim.episodes for e in _fault_episodes(sim, level)
              if e.start_s >= onset_s(sim, label)]
    )  # fmt: skip
    assert faulty[label.node] == PIECES
    singles = {node: kinds for node, kinds in scheduled.items() if node != label.node}
    placed = {b.node for b in sim.scenario.benign}
    assert placed <= set(singles) and label.node not in placed
    for node in placed:
        assert len({b.kind for b in sim.scenario.benign if b.node == node}) == 1
    assert {b.kind for b in sim.scenario.benign} >= {"ecc_bursts", "throttles", "pcie_replays",
                                                     "symbol_errors", "cpu_pressure"}  # fmt: skip
    # Together the pieces slow the compound node's rank a few percent, then the job a little.
    steps = tables["train_step/train"]
    job = sim.cluster.jobs[0]
    rank = str(int(np.flatnonzero(job.rank_gpu == 7 * 8 + 4)[0]))  # node-0008 gpu 4
    start = onset_s(sim, label)
    slowed = rank_compute(sim, steps, rank, (start + 20, start + 600)) / rank_compute(
        sim, steps, rank, (60, start)
    )
    assert 1.02 <= slowed <= 1.06


# ---- benign runs ----------------------------------------------------------------------------


def test_the_benign_throttle_pattern_recurs_in_both_jobs_of_its_node() -> None:
    sim, _ = run(named("benign_single_anomalies_small_jobs_47s"))
    assert [label.fault_type for label in sim.truth] == ["none"]
    [pattern] = [b for b in sim.scenario.benign if b.kind == "throttles"]
    jobs = [j for j in sim.cluster.jobs if pattern.node in j.nodes]
    assert len(jobs) == 2
    times = [pattern.start_s + n * pattern.every_s for n in range(pattern.count)]
    for job in jobs:
        assert any(job.start_s <= t < job.end_s for t in times), job.name


# ---- the simulator's new pieces -------------------------------------------------------------


def _parse(quirks: dict | None = None, benign: list | None = None, faults: list | None = None):
    raw: dict = {"cluster": {"nodes": 4}, "job": [{"name": "j", "nodes": 4, "step_s": 2.0}],
                 "duration_s": 120}  # fmt: skip
    for key, value in (("quirks", quirks), ("benign", benign), ("fault", faults)):
        if value is not None:
            raw[key] = value
    return parse_scenario(raw, "t")


def test_spare_nodes_get_no_counted_quirk() -> None:
    scenario = _parse(quirks={"hot_nodes": 3, "slow_clock_gpus": 24, "noisy_ports": 3,
                              "spare": ["node-0002"]})  # fmt: skip
    for seed in range(5):
        sim = Simulation(scenario, seed=seed)
        assert len(sim.quirks) == 3 + 24 + 3
        assert "node-0002" not in {q.node for q in sim.quirks}


def test_the_single_anomaly_kinds_touch_one_node_and_refuse_a_large_cpu_factor() -> None:
    kinds = {"throttles": "gpu", "pcie_replays": "gpu", "symbol_errors": "port",
             "cpu_pressure": "host"}  # fmt: skip
    for kind, level in kinds.items():
        entry = {"kind": kind, "node": "node-0003", "gpu": 2, "start_s": 10, "duration_s": 5,
                 "count": 2, "every_s": 30, "factor": 1.02}  # fmt: skip
        sim = Simulation(_parse(quirks={"hot_nodes": 0, "slow_clock_gpus": 0, "noisy_ports": 0},
                                benign=[entry]), seed=1)  # fmt: skip
        scheduled = {id(e) for e in sim.background_episodes[-8:]}  # [[benign]] come last
        mine = [e for e in sim.episodes[level].episodes if id(e) in scheduled]
        assert {float(e.start_s) for e in mine} == {10.0, 40.0}, kind
        expected = 2 if level == "host" else 2 * 8 + 2
        assert all(e.entities.tolist() == [expected] for e in mine), kind
        assert [lbl.fault_type for lbl in sim.truth] == ["none"]
    big = {"kind": "cpu_pressure", "node": "node-0001", "start_s": 0, "factor": 1.3}
    with pytest.raises(ScenarioError, match="factor"):
        _parse(benign=[big])


def test_the_drift_faults_change_clock_compute_and_heat_only() -> None:
    gpu = {"type": "gpu_clock_drift", "node": "node-0002", "gpu": 4, "onset_s": 30,
           "clock": 0.96, "temp_rise": 5.0, "rise_s": 20.0}  # fmt: skip
    node = {**gpu, "type": "node_clock_drift"}
    for fault, entities, component in ((gpu, [12], "gpu"), (node, list(range(8, 16)), "node")):
        sim = Simulation(_parse(faults=[fault]), seed=1)
        [label] = sim.truth
        assert label.component == component and label.onset_ns == sim.start_ns + 30 * 10**9
        mine = _fault_episodes(sim, "gpu")
        assert {e.effect for e in mine} == {"clock", "compute", "temp"}
        assert all(e.entities.tolist() == entities for e in mine)
        clock = [e for e in mine if e.effect == "clock"]
        assert [(e.start_s, e.value) for e in clock] == [(40.0, 0.96)]  # half-way up the heat
        assert [e.value for e in mine if e.effect == "compute"] == [pytest.approx(1 / 0.96)]


def test_the_new_knobs_default_to_the_old_pieces() -> None:
    base = {"node": "node-0001", "gpu": 1, "port": 1, "onset_s": 10}
    plain = Simulation(_parse(faults=[{**base, "type": "compound_benign"}]), seed=3)
    explicit = Simulation(_parse(faults=[{**base, "type": "compound_benign", "ecc_rate": 0.4,
                                          "replay_rate": 0.25, "gpu_compute": 1.04,
                                          "throttle_every_s": 40, "throttle_s": 12,
                                          "symbol_rate": 1.5, "comm": 1.12, "psi_cpu": 0.12,
                                          "host_compute": 1.05}]), seed=3)  # fmt: skip
    for level in ("gpu", "host", "port"):
        old = [(e.effect, e.start_s, e.end_s, e.value) for e in plain.episodes[level].episodes]
        new = [(e.effect, e.start_s, e.end_s, e.value) for e in explicit.episodes[level].episodes]
        assert old == new, level
    slow = Simulation(_parse(faults=[{**base, "type": "fail_slow_gpu"}]), seed=3)
    power = [e.value for e in _fault_episodes(slow, "gpu") if e.effect == "power"]
    assert power == [0.75]


BENIGN = [p for p in ALL if not load_scenario(p).faults]


@pytest.mark.parametrize("path", BENIGN, ids=[p.stem for p in BENIGN])
def test_benign_jobs_step_as_their_step_s_says(path: Path) -> None:
    sim, tables = run(path)
    for job in sim.cluster.jobs:
        median = float(np.median(tables[f"train_step/{job.name}"].fields["step_time_seconds"]))
        assert 0.97 * job.config.step_s <= median <= 1.15 * job.config.step_s, job.name
