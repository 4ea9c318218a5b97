"""Each fault type of the simulator produces its documented signature, and only where it
should: on node-0006 (GPU 3, port mlx5_3) of job "train", from 300 s, in the fault_* scenarios.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest

from reflex_localize.schemas.codec import Point
from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator import Simulation, fault_types, load_scenario, scenario_names
from reflex_localize.simulator.cluster import build_cluster
from reflex_localize.simulator.effects import Episode
from reflex_localize.simulator.faults import Context, build_fault
from reflex_localize.simulator.scenario import FaultConfig
from reflex_localize.simulator.tables import concat_frames

ONSET_S, NODE, GPU, HCA = 300, "node-0006", "3", "mlx5_3"
CRASHING = ["xid48", "xid94", "xid95", "xid79", "xid119", "xid74", "row_remap_exhaustion",
            "ib_link_down", "software_crash"]  # fmt: skip
ROOT_XID = {"xid48": 48, "xid94": 94, "xid95": 95, "xid79": 79, "xid119": 119, "xid74": 74,
            "row_remap_exhaustion": 64}  # fmt: skip
SLOWING = ["nvlink_degradation", "pcie_downgrade", "ib_flapping", "pfc_storm", "thermal_throttle",
           "power_brake", "fail_slow_gpu", "host_contention", "io_stall", "compound_benign",
           "pipeline_imbalance", "seqlen_imbalance"]  # fmt: skip


@dataclass
class Run:
    sim: Simulation
    groups: dict[str, list[Frame]]  # per measurement, one frame per field set
    events: list[Point]

    def seconds(self, frame: Frame) -> np.ndarray:
        return (frame.time_ns - self.sim.start_ns) / 1e9

    def table(self, measurement: str, field: str | None = None) -> Frame:
        """Rows of the frames that carry ``field`` (all of them when None)."""
        frames = [f for f in self.groups[measurement] if field is None or field in f.fields]
        return concat_frames(frames)

    def rows(self, measurement: str, field: str | None = None, **tags: str) -> Frame:
        frame = self.table(measurement, field)
        mask = np.ones(len(frame), dtype=bool)
        for key, value in tags.items():
            mask &= frame.tags[key] == value
        return frame.take(mask)

    def series(self, measurement: str, field: str, **tags: str) -> tuple[np.ndarray, np.ndarray]:
        frame = self.rows(measurement, field, **tags)
        return self.seconds(frame), frame.fields[field]

    def step_time(self, job: str, first_s: float, last_s: float) -> float:
        """Median job step time over [first_s, last_s): robust to checkpoint pauses."""
        times, values = self.series("train_step", "step_time_seconds", job=job)
        window = (times >= first_s) & (times < last_s)
        return float(np.median(values[window]))

    def kind(self, kind: str) -> list[Point]:
        return [e for e in self.events if e.tags["kind"] == kind]


@cache
def run(scenario: str, seed: int = 11) -> Run:
    sim = Simulation(load_scenario(scenario), seed=seed)
    frames: dict[tuple[str, tuple[str, ...]], list[Frame]] = {}
    events: list[Point] = []
    for chunk in sim.chunks(seconds=30.0):
        for frame in chunk:
            if frame.measurement == "event":
                events += frame.points()
            frames.setdefault((frame.measurement, tuple(frame.fields)), []).append(frame)
    groups: dict[str, list[Frame]] = {}
    for (measurement, _), group in frames.items():
        groups.setdefault(measurement, []).append(concat_frames(group))
    return Run(sim, groups, sorted(events, key=lambda e: e.time_ns))


def hardware_events(r: Run) -> list[Point]:
    """Events other than the benign corrected machine checks of the background."""
    return [e for e in r.events if e.tags["kind"] != "mce"]


def event_s(r: Run, event: Point) -> float:
    return (event.time_ns - r.sim.start_ns) / 1e9


# Fault types written for the evaluation families of issue 16 (hidden_fields, comm_straggler,
# one_gpu_two_sources): their scenarios and tests are there (tests/test_families_signals.py).
FAMILY_ONLY = {"ib_rate_degraded", "ib_link_flap", "nic_speed_degraded", "power_cap",
               "hbm_clock_low", "local_disk_slow", "xid_kmsg_and_nvml",
               "gpu_clock_drift", "node_clock_drift"}  # fmt: skip
LIBRARY_KINDS = sorted(set(fault_types()) - FAMILY_ONLY)


def test_every_fault_type_has_a_scenario() -> None:
    names = set(scenario_names())
    assert {f"fault_{kind}" for kind in LIBRARY_KINDS} <= names
    assert set(fault_types()) >= FAMILY_ONLY  # every name here is a real fault type


@pytest.mark.parametrize("kind", LIBRARY_KINDS)
def test_truth_names_the_injected_fault(kind: str) -> None:
    [label] = run(f"fault_{kind}").sim.truth
    assert label.fault_type == kind
    assert label.onset_ns == run(f"fault_{kind}").sim.start_ns + ONSET_S * 10**9
    assert label.job == "train"
    if label.expect == "hardware":
        assert label.node == NODE
        assert label.component in ("gpu", "nic", "host", "node")
        expected_index = {"gpu": GPU, "nic": f"{HCA}/1"}.get(label.component, "")
        assert label.index == expected_index
    else:
        assert label.component == "none" and label.index == ""


@pytest.mark.parametrize("kind", CRASHING)
def test_crash_root_is_first_and_the_cascade_is_loud(kind: str) -> None:
    r = run(f"fault_{kind}")
    job = next(j for j in r.sim.cluster.jobs if j.name == "train")
    timeouts = r.kind("nccl_timeout")
    exits = r.kind("process_exit")
    assert len(timeouts) == job.world_size - 1  # every rank but the dead one
    assert len(exits) == job.world_size
    assert {t.tags["node"] for t in timeouts} == set(job.nodes)
    roots = [e for e in r.events if e.tags["kind"] in ("xid", "link_down")]
    if kind == "software_crash":
        roots = [e for e in exits if "RuntimeError" in str(e.fields["message"])]
    root = roots[-1]
    assert root.tags["node"] == NODE
    root_s = event_s(r, root)
    # The root comes first; the cascade follows seconds later, at jittered times.
    assert all(event_s(r, t) > root_s + 5 for t in timeouts)
    assert np.std([event_s(r, t) for t in timeouts]) > 1.0
    if kind in ROOT_XID:
        assert root.fields["code"] == ROOT_XID[kind] and root.fields["gpu"] == int(GPU)
    # No step of the job completes after the root error.
    times, _ = r.series("train_step", "step", job="train")
    assert times.max() < root_s + 0.01
    membership = r.rows("job_membership", job="train")
    assert not membership.fields["active"][-1]


def test_xid79_gpu_disappears_and_reports_lost() -> None:
    r = run("fault_xid79")
    times, _ = r.series("gpu", "power_watts", node=NODE, gpu=GPU)
    assert times.max() < ONSET_S and times.min() == 0
    lost = r.kind("gpu_lost")
    assert [e.tags["node"] for e in lost] == [NODE]
    assert ONSET_S <= event_s(r, lost[0]) < ONSET_S + 5


def test_ecc_xid_counts_an_uncorrectable_error() -> None:
    r = run("fault_xid48")
    times, uncorrected = r.series("gpu", "ecc_uncorrected_volatile", node=NODE, gpu=GPU)
    assert uncorrected[times < ONSET_S].max() == 0 and uncorrected[-1] == 1
    _, pending = r.series("gpu", "remapped_rows_pending", node=NODE, gpu=GPU)
    assert pending[times >= ONSET_S].all()


def test_xid95_on_volta_retires_pages() -> None:
    r = run("fault_xid95")
    frame = r.rows("gpu", "retired_pages_dbe", node=NODE, gpu=GPU)
    assert frame.tags["profile"][0] == "v100-sxm2-32gb"
    assert "retired_pages_dbe" in frame.fields and "remapped_rows_pending" not in frame.fields
    times = r.seconds(frame)
    assert frame.fields["retired_pages_dbe"][times > ONSET_S + 1].min() >= 1


def test_row_remap_exhaustion_ramps_then_63_then_64() -> None:
    r = run("fault_row_remap_exhaustion")
    xids = [e for e in r.kind("xid") if e.tags["node"] == NODE]
    assert [e.fields["code"] for e in xids] == [63, 64]
    t63, t64 = (event_s(r, e) for e in xids)
    assert ONSET_S < t63 < t64
    times, corrected = r.series("gpu", "ecc_corrected_volatile", node=NODE, gpu=GPU)
    before = np.ptp(corrected[(times >= ONSET_S - 120) & (times < ONSET_S)])
    ramp = np.ptp(corrected[(times >= ONSET_S) & (times < t63)])
    assert before <= 2 and ramp > 500
    _, failure = r.series("gpu", "remapped_rows_failure", node=NODE, gpu=GPU)
    assert not failure[times < t64].any() and failure[times >= t64 + 1].all()


def test_xid74_follows_growing_nvlink_crc_errors() -> None:
    r = run("fault_xid74")
    [xid] = [e for e in r.kind("xid") if e.tags["node"] == NODE]
    t74 = event_s(r, xid)
    links = r.rows("gpu_nvlink", node=NODE, gpu=GPU)
    times = r.seconds(links)
    crc = links.fields["crc_flit_errors"]
    per_read = np.array([crc[times == t].sum() for t in np.unique(times)])
    read_times = np.unique(times)
    early = np.diff(per_read[(read_times >= ONSET_S) & (read_times < ONSET_S + 40)])
    late = np.diff(per_read[(read_times >= t74 - 40) & (read_times < t74)])
    assert late.mean() > 3 * max(early.mean(), 1)


def test_nvlink_degradation_drops_links() -> None:
    r = run("fault_nvlink_degradation")
    times, active = r.series("gpu", "nvlink_active_links", node=NODE, gpu=GPU)
    assert active[times < ONSET_S].min() == 18 and active[times >= ONSET_S].max() == 14
    links = r.rows("gpu_nvlink", node=NODE, gpu=GPU)
    assert (~links.fields["active"][r.seconds(links) >= ONSET_S]).sum() > 0


def test_pcie_downgrade_halves_the_width() -> None:
    r = run("fault_pcie_downgrade")
    times, width = r.series("gpu", "pcie_link_width", node=NODE, gpu=GPU)
    assert (width[times < ONSET_S] == 16).all() and (width[times >= ONSET_S] == 8).all()
    _, replays = r.series("gpu", "pcie_replay_errors", node=NODE, gpu=GPU)
    assert replays[-1] - replays[times < ONSET_S][-1] > 50


def _port_growth(r: Run, field: str, first_s: float, last_s: float) -> tuple[float, float]:
    """Growth of a port counter on the faulty port, and the largest growth on any other."""
    ports = r.table("ib_port", field)
    times = r.seconds(ports)
    window = (times >= first_s) & (times < last_s)
    key = ports.tags["node"] + "/" + ports.tags["hca"]
    growth = {}
    for name in np.unique(key):
        values = ports.fields[field][window & (key == name)]
        growth[name] = float(values[-1] - values[0])
    faulty = growth.pop(f"{NODE}/{HCA}")
    return faulty, max(growth.values())


def test_ib_flapping_grows_symbol_errors_and_recoveries() -> None:
    r = run("fault_ib_flapping")
    faulty, others = _port_growth(r, "symbol_error", ONSET_S, 720)
    assert faulty > 1000 and faulty > 20 * max(others, 1)
    recoveries, _ = _port_growth(r, "link_error_recovery", ONSET_S, 720)
    assert recoveries >= 10
    assert _port_growth(r, "link_error_recovery", 0, ONSET_S)[0] == 0


def _ib_flapping_episodes(**params: float) -> list[Episode]:
    cluster = build_cluster(load_scenario("fault_ib_flapping"))
    config = FaultConfig("ib_flapping", 300.0, node=NODE, port=3, params=dict(params))
    context = Context(cluster, np.random.default_rng(0), 900.0, 0, "quiet_port")
    return build_fault(config, 0, context).episodes


def _effects(episodes: list[Episode]) -> set[tuple[str, float]]:
    return {(e.effect, e.value) for e in episodes}


def test_ib_flapping_can_be_a_quiet_port_and_its_defaults_stay_a_bad_cable() -> None:
    # The node compounds' port piece (simulator/scenarios/families/node_compound): a trickle of
    # symbol and receive errors, no retrain, no slower communication.
    loud = _ib_flapping_episodes()
    assert {("symbol_error", 40.0), ("rcv_error", 3.0), ("comm", 1.8)} <= _effects(loud)
    assert sum(e.effect == "recovery" for e in loud) >= 20  # every ~20 s over 600 s
    quiet = _ib_flapping_episodes(symbol_rate=0.05, rcv_rate=0.01, comm=1.0, flap_every_s=0)
    assert _effects(quiet) == {("symbol_error", 0.05), ("rcv_error", 0.01), ("comm", 1.0)}
    silent = _ib_flapping_episodes(symbol_rate=0.05, rcv_rate=0, comm=1.0, flap_every_s=0)
    assert _effects(silent) == {("symbol_error", 0.05), ("comm", 1.0)}


def test_ib_link_down_logs_and_drops_the_port() -> None:
    r = run("fault_ib_link_down")
    [down] = r.kind("link_down")
    assert down.tags["node"] == NODE and down.fields["device"] == f"{HCA}/1"
    times, state = r.series("ib_port", "state", node=NODE, hca=HCA)
    assert (state[times < ONSET_S] == 4).all() and (state[times >= ONSET_S] == 1).all()
    _, downed = r.series("ib_port", "link_downed", node=NODE, hca=HCA)
    assert downed[-1] - downed[0] == 1


def test_pfc_storm_comes_from_one_port() -> None:
    r = run("fault_pfc_storm")
    faulty, others = _port_growth(r, "pfc_tx_pause_frames", ONSET_S, 720)
    assert faulty > 50 * others
    waits = _port_growth(r, "port_xmit_wait", ONSET_S, 720)[1]
    assert waits > 10 * _port_growth(r, "port_xmit_wait", 0, ONSET_S)[1]


def test_thermal_throttle_heats_and_throttles() -> None:
    r = run("fault_thermal_throttle")
    times, temp = r.series("gpu", "temperature_celsius", node=NODE, gpu=GPU)
    _, reasons = r.series("gpu", "clocks_event_reasons", node=NODE, gpu=GPU)
    _, clock = r.series("gpu", "sm_clock_mhz", node=NODE, gpu=GPU)
    late = times >= ONSET_S + 90
    assert temp[late].mean() > temp[times < ONSET_S].mean() + 15
    assert ((reasons[late] & 0x60) == 0x60).all()
    assert clock[late].mean() < 0.8 * clock[times < ONSET_S].mean()


def test_power_brake_hits_the_whole_node() -> None:
    r = run("fault_power_brake")
    frame = r.rows("gpu", node=NODE)
    late = r.seconds(frame) >= ONSET_S
    assert ((frame.fields["clocks_event_reasons"][late] & 0x80) != 0).all()
    assert len(np.unique(frame.tags["gpu"][late])) == 8


def test_fail_slow_gpu_has_a_low_clock_and_no_reason() -> None:
    r = run("fault_fail_slow_gpu")
    times, clock = r.series("gpu", "sm_clock_mhz", node=NODE, gpu=GPU)
    _, reasons = r.series("gpu", "clocks_event_reasons", node=NODE, gpu=GPU)
    after = times >= ONSET_S
    assert clock[after].max() < 0.7 * 1980
    assert (reasons[after] == 0).mean() > 0.95  # only a rare benign throttle may show
    # Its rank is the one computing longest; the others wait for it in communication.
    steps = r.rows("train_step", job="train")
    late = r.seconds(steps) > ONSET_S + 5
    slow = steps.tags["node"] == NODE
    rank_compute = steps.fields["compute_seconds"]
    assert rank_compute[late & slow].max() > 1.3 * np.median(rank_compute[late & ~slow])
    assert np.median(steps.fields["comm_seconds"][late & ~slow]) > 2 * np.median(
        steps.fields["comm_seconds"][~late & ~slow]
    )


def test_host_contention_shows_in_pressure() -> None:
    r = run("fault_host_contention")
    times, psi = r.series("host", "psi_cpu_some_avg10_ratio", node=NODE)
    assert psi[times >= ONSET_S].mean() > psi[times < ONSET_S].mean() + 0.3
    _, available = r.series("host", "memory_available_bytes", node=NODE)
    assert available[times >= ONSET_S].mean() < 0.2 * available[times < ONSET_S].mean()


def test_io_stall_shows_in_io_pressure() -> None:
    r = run("fault_io_stall")
    times, psi = r.series("host", "psi_io_some_avg10_ratio", node=NODE)
    assert np.median(psi[times >= ONSET_S]) > np.median(psi[times < ONSET_S]) + 0.5


@pytest.mark.parametrize("kind", SLOWING)
def test_slowing_faults_slow_the_whole_job(kind: str) -> None:
    r = run(f"fault_{kind}")
    before = r.step_time("train", 60, ONSET_S - 10)
    after = r.step_time("train", ONSET_S + 60, 700)
    floor = {"seqlen_imbalance": 1.04, "compound_benign": 1.04}.get(kind, 1.15)
    assert after > floor * before, (before, after)
    other = r.step_time("small", ONSET_S + 60, 700) / r.step_time("small", 60, ONSET_S - 10)
    assert 0.95 < other < 1.05  # the other job is untouched


def test_nccl_hang_stops_every_rank_and_spares_the_cause_from_timeouts() -> None:
    r = run("fault_nccl_hang")
    times, _ = r.series("train_step", "step", job="train")
    assert times.max() < ONSET_S + 0.01
    job = next(j for j in r.sim.cluster.jobs if j.name == "train")
    timed_out = {e.tags["node"] for e in r.kind("nccl_timeout")}
    assert timed_out == set(job.nodes) - {NODE}
    assert all(event_s(r, e) > ONSET_S + 10 for e in r.kind("nccl_timeout"))
    gpus = r.rows("gpu", node=NODE)
    hung = (r.seconds(gpus) > ONSET_S + 2) & (r.seconds(gpus) < ONSET_S + 25)
    peers = r.rows("gpu", node="node-0001")
    peers_hung = (r.seconds(peers) > ONSET_S + 2) & (r.seconds(peers) < ONSET_S + 25)
    assert gpus.fields["utilization_gpu_ratio"][hung].max() < 0.05
    assert peers.fields["utilization_gpu_ratio"][peers_hung].min() > 0.9


def test_sdc_is_a_loss_spike_and_nothing_else() -> None:
    r = run("fault_sdc")
    steps = r.rows("train_step", job="train")
    times = r.seconds(steps)
    loss = steps.fields["loss"]
    assert loss[times > ONSET_S].max() > 3 * np.median(loss[times < ONSET_S])
    # The corrupted replica spikes first (its own micro-batch); everyone follows a step later.
    spike = loss > 3 * np.median(loss[times < ONSET_S])
    first = times[spike].min()
    first_rows = spike & (np.abs(times - first) < 0.01)
    assert NODE in set(steps.tags["node"][first_rows])
    assert first_rows.sum() < 0.5 * (np.abs(times - first) < 0.01).sum()
    assert not hardware_events(r)  # no XID, no link event, no timeout: only the loss tells
    assert r.step_time("train", ONSET_S + 30, 700) < 1.05 * r.step_time("train", 60, 290)


def test_compound_benign_pieces_are_each_small() -> None:
    r = run("fault_compound_benign")
    times, reasons = r.series("gpu", "clocks_event_reasons", node=NODE, gpu=GPU)
    after = times >= ONSET_S
    assert 0.1 < (reasons[after] != 0).mean() < 0.5  # intermittent, like benign throttles
    _, replays = r.series("gpu", "pcie_replay_errors", node=NODE, gpu=GPU)
    _, ecc = r.series("gpu", "ecc_corrected_volatile", node=NODE, gpu=GPU)
    assert replays[-1] - replays[after][0] > 20 and ecc[-1] - ecc[after][0] > 20
    faulty, _ = _port_growth(r, "symbol_error", ONSET_S, 720)
    assert faulty > 100
    assert not hardware_events(r)  # nothing logs it


def test_pipeline_imbalance_is_the_last_stage_and_not_hardware() -> None:
    r = run("fault_pipeline_imbalance")
    steps = r.rows("train_step", job="train")
    job = next(j for j in r.sim.cluster.jobs if j.name == "train")
    last_stage = set(np.flatnonzero(job.pp_rank == job.pp - 1).astype(str))
    is_last = np.isin(steps.tags["rank"], list(last_stage))
    late = r.seconds(steps) > ONSET_S + 5
    compute = steps.fields["compute_seconds"]
    assert np.median(compute[late & is_last]) > 1.25 * np.median(compute[late & ~is_last])
    assert np.median(compute[~late & is_last]) < 1.1 * np.median(compute[~late & ~is_last])
    assert not hardware_events(r)
