"""The families of issues 16 and 17 carry what they claim (simulator/scenarios/families/README.md).

No verdict of Reflex is asserted here: these tests read the simulated telemetry and the truth.
Coexisting incidents have two onsets in one job on two nodes; checkpoints slow every rank and
are marked where the hook marks them; a moving node serves two jobs in turn and its control
differs only in the first job; a node compound slows the job a few percent from pieces that
are each small (its port a noisy one, never retrained), and a loud harmless blip on another
node of the job has no label and does not slow it; a quirky fleet has quirks on a third of its
nodes, never the faulty one. The harness scores every label of a multi-fault job and pairs each
moving node with its control.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from reflex_localize.schemas.frame import Frame, validate_frame
from reflex_localize.shell import eval_harness
from reflex_localize.simulator import Simulation, family_scenarios, load_scenario
from reflex_localize.simulator.background import FLEET_QUIRKS
from reflex_localize.simulator.scenario import Scenario, ScenarioError, parse_scenario
from reflex_localize.simulator.tables import concat_frames

FAMILIES = {"incidents_coexist": "ic_", "checkpoint_phases": "cp_", "moving_node": "mn_",
            "node_compound": "nc_", "quirky_fleet": "qf_"}  # fmt: skip
ALL = [path for family in FAMILIES for path in family_scenarios(family)]


def ids(paths: list[Path]) -> list[str]:
    return [path.stem for path in paths]


def named(family: str, stem: str) -> Path:
    [path] = [p for p in family_scenarios(family) if p.stem == stem]
    return path


@cache
def run(path: Path, seconds: int | None = None, variant: str = "") -> tuple:
    """(simulation, frames per measurement); ``variant`` "no_faults" drops faults and benign
    episodes, "benign_only" the faults alone."""
    scenario = load_scenario(path)
    if variant == "no_faults":
        scenario = dataclasses.replace(scenario, faults=(), benign=())
    elif variant == "benign_only":
        scenario = dataclasses.replace(scenario, faults=())
    sim = Simulation(scenario, seed=7)
    frames: dict[str, list[Frame]] = defaultdict(list)
    for number, chunk in enumerate(sim.chunks(seconds=10.0)):
        if seconds is not None and number * 10 >= seconds:
            break
        for frame in chunk:
            frames[frame.measurement].append(frame)
    return sim, frames


def steps(frames: dict[str, list[Frame]], job: str) -> Frame:
    # Per job before concatenating: a job that marks checkpoints has one more field.
    return concat_frames(f for f in frames["train_step"] if f.tags["job"][0] == job)


def seconds_of(sim: Simulation, table: Frame) -> np.ndarray:
    return (table.time_ns - sim.start_ns) / 1e9


def median_step(sim: Simulation, table: Frame, start_s: float, end_s: float) -> float:
    at = seconds_of(sim, table)
    return float(np.median(table.fields["step_time_seconds"][(at >= start_s) & (at < end_s)]))


# ---- every new family -----------------------------------------------------------------------


def test_the_five_families_are_listed_with_their_prefixes() -> None:
    for path in ALL:
        assert load_scenario(path).name.startswith(FAMILIES[path.parent.name]), path
    names = [load_scenario(path).name for path in ALL]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_has_several_layouts_and_a_benign_or_control_run(family: str) -> None:
    scenarios = [load_scenario(path) for path in family_scenarios(family)]
    assert len(scenarios) >= 6
    layouts = {(job.nodes, job.pp, job.step_s) for s in scenarios for job in s.jobs}
    assert len(layouts) >= 4
    if family == "moving_node":
        assert sum(bool(s.evaluation.control_of) for s in scenarios) == len(scenarios) // 2
    else:
        assert any(not s.faults for s in scenarios), "a benign-only case counts false events"


@pytest.mark.parametrize("path", ALL, ids=ids(ALL))
def test_scenario_loads_strictly_obeys_the_schema_and_labels_hardware(path: Path) -> None:
    sim, frames = run(path, 120)
    for frame in (f for group in frames.values() for f in group):
        assert not validate_frame(frame)[1], frame.measurement
    jobs = {job.name: job for job in sim.cluster.jobs}
    for label in sim.truth:
        if label.fault_type == "none":
            continue
        assert label.expect == "hardware" and label.job in jobs
        assert label.node in jobs[label.job].nodes
        assert label.component in ("gpu", "nic", "host", "node")


# ---- incidents that coexist -----------------------------------------------------------------

TWO = [p for p in family_scenarios("incidents_coexist") if len(load_scenario(p).faults) == 2]


@pytest.mark.parametrize("path", TWO, ids=ids(TWO))
def test_two_faults_in_one_job_on_two_nodes_the_second_while_the_first_lasts(path: Path) -> None:
    sim = Simulation(load_scenario(path), seed=7)
    first, second = sorted(sim.truth, key=lambda label: label.onset_ns)
    assert first.job == second.job and first.node != second.node
    assert first.onset_ns < second.onset_ns <= first.onset_ns + 180 * 10**9
    assert first.end_ns >= second.onset_ns  # the first fault is still there


@pytest.mark.parametrize(
    ("stem", "job"),
    [("congestion_then_fail_slow_8s", "train"), ("storage_then_host_25s", "train"),
     ("benign_congestion_and_storage", "train"), ("benign_congestion_and_storage", "side")],
)  # fmt: skip
def test_a_benign_phase_slows_the_whole_job_with_no_label_of_its_own(stem: str, job: str) -> None:
    path = named("incidents_coexist", stem)
    scenario = load_scenario(path)
    sim, frames = run(path)
    assert all(label.onset_ns >= sim.start_ns + 400 * 10**9 for label in sim.truth
               if label.fault_type != "none")  # fmt: skip
    table = steps(frames, job)
    clean = steps(run(path, variant="no_faults")[1], job)
    for phase in (b for b in scenario.benign if b.job == job):
        inside = (phase.start_s + 30, phase.start_s + phase.duration_s)
        before = (phase.start_s - 120, phase.start_s)
        slowed = median_step(sim, table, *inside) / median_step(sim, table, *before)
        assert slowed > 1.05, (phase.kind, slowed)
        ranks = table.tags["rank"][(seconds_of(sim, table) >= inside[0])
                                   & (seconds_of(sim, table) < inside[1])]  # fmt: skip
        assert len(set(ranks)) == len(set(table.tags["rank"]))  # every rank, not one
        assert median_step(sim, clean, *inside) < median_step(sim, table, *inside)


def test_the_slow_building_fault_slows_the_job_a_little_at_first() -> None:
    path = named("incidents_coexist", "slow_build_fail_slow_25s")
    sim, frames = run(path)
    [label] = sim.truth
    onset = (label.onset_ns - sim.start_ns) / 1e9
    table = steps(frames, "train")
    ratio = median_step(sim, table, onset + 30, onset + 300) / median_step(sim, table, 0, onset)
    assert 1.08 < ratio < 1.25  # a job-wide regression of the kind a trigger sees


# ---- checkpoint phases ----------------------------------------------------------------------

CHECKPOINTED = family_scenarios("checkpoint_phases")


@pytest.mark.parametrize("path", CHECKPOINTED, ids=ids(CHECKPOINTED))
def test_checkpoints_slow_every_rank_and_are_marked_only_where_the_hook_marks(
    path: Path,
) -> None:
    scenario = load_scenario(path)
    sim, frames = run(path)
    for job in scenario.jobs:
        assert 60 <= job.checkpoint_every_s <= 300 and 10 <= job.checkpoint_s <= 60
        table = steps(frames, job.name)
        runtime = next(r for r in sim.jobs if r.job.name == job.name)
        assert len(runtime.checkpoints) >= 3
        assert ("checkpoint_seconds" in table.fields) == job.checkpoint_marked
        ends = seconds_of(sim, table)
        for start, end in runtime.checkpoints[:3]:
            # The step that holds the checkpoint ends after it, on every rank.
            step_rows = (ends >= end) & (ends < end + 1.5 * job.step_s + 1)
            held = table.fields["step_time_seconds"][step_rows]
            assert len(set(table.tags["rank"][step_rows])) == len(set(table.tags["rank"]))
            assert held.min() >= job.checkpoint_s, (start, held.min())
            if job.checkpoint_marked:
                marked = table.fields["checkpoint_seconds"][step_rows]
                assert np.allclose(marked.max(), job.checkpoint_s)
        if job.checkpoint_marked:
            marked = table.fields["checkpoint_seconds"]
            assert (marked == 0).mean() > 0.5  # the other steps say 0, not the checkpoint


def test_hosts_are_io_busy_during_a_checkpoint() -> None:
    path = named("checkpoint_phases", "benign_unmarked_60s_10s")
    sim, frames = run(path)
    hosts = concat_frames(frames["host"])
    at = seconds_of(sim, hosts)
    start, end = next(r for r in sim.jobs).checkpoints[2]
    during = (at >= np.ceil(start)) & (at < end)
    quiet = (at >= end + 5) & (at < end + 30)
    io = hosts.fields["psi_io_some_avg10_ratio"]
    assert io[during].mean() > io[quiet].mean() + 0.15
    assert set(hosts.tags["node"][during]) == set(next(iter(sim.cluster.jobs)).nodes)


@pytest.mark.parametrize("path", [p for p in CHECKPOINTED if load_scenario(p).faults],
                         ids=ids([p for p in CHECKPOINTED if load_scenario(p).faults]))  # fmt: skip
def test_the_real_fault_starts_near_a_checkpoint(path: Path) -> None:
    sim = run(path)[0]
    [label] = sim.truth
    onset = (label.onset_ns - sim.start_ns) / 1e9
    starts = [start for start, _ in sim.jobs[0].checkpoints]
    assert min(abs(onset - start) for start in starts) <= 25


# ---- a node that moves from one job to the next ---------------------------------------------

MOVING = [p for p in family_scenarios("moving_node") if not load_scenario(p).evaluation.control_of]


def control_of(path: Path) -> Path:
    return path.with_name(f"{path.stem}_control.toml")


@pytest.mark.parametrize("path", MOVING, ids=ids(MOVING))
def test_the_moving_node_serves_job_a_then_job_b(path: Path) -> None:
    sim, frames = run(path)
    control = load_scenario(control_of(path))
    assert control.evaluation.control_of == sim.scenario.name
    job = control.evaluation.measured_job
    a, b = sim.cluster.jobs
    assert b.name == job and a.end_s < b.start_s
    [moving] = set(a.nodes) & set(b.nodes)
    rows = {name: set(steps(frames, name).tags["node"]) for name in (a.name, b.name)}
    assert moving in rows[a.name] and moving in rows[b.name]
    members = concat_frames(frames["job_membership"])
    closed = members.take((members.tags["job"] == a.name) & ~members.fields["active"])
    assert moving in set(closed.tags["node"])  # job a said goodbye before job b came
    [measured] = [label for label in sim.truth if label.job == job]
    assert measured.node == moving
    history = [label for label in sim.truth if label.job == a.name]
    assert all(label.node == moving for label in history)
    assert history or [e for e in sim.scenario.benign if e.node == moving]


@pytest.mark.parametrize("path", MOVING, ids=ids(MOVING))
def test_the_control_differs_only_before_job_b(path: Path) -> None:
    history, control = load_scenario(path), load_scenario(control_of(path))
    assert history.jobs == control.jobs and history.duration_s == control.duration_s
    start_b = next(j for j in history.jobs if j.name == control.evaluation.measured_job).start_s
    extra_faults = [f for f in history.faults if f not in control.faults]
    extra_benign = set(history.benign) - set(control.benign)
    assert extra_faults or extra_benign
    assert all(f in history.faults for f in control.faults)
    assert all(f.job != control.evaluation.measured_job for f in extra_faults)
    assert all(e.start_s + e.count * e.every_s < start_b for e in extra_benign)
    # The same job b, step for step: its ranks' compute before the fault is identical.
    _, with_history = run(path)
    _, clean = run(control_of(path))
    job = control.evaluation.measured_job
    first = steps(with_history, job).fields["compute_seconds"][:64]
    assert np.array_equal(first, steps(clean, job).fields["compute_seconds"][:64])


def test_application_xids_repeat_on_the_moving_gpu_in_both_jobs() -> None:
    path = named("moving_node", "app_xid_then_fail_slow_25s")
    frames = run(path)[1]
    events = concat_frames(f for f in frames["event"] if "gpu" in f.fields)
    xids = events.take((events.tags["kind"] == "xid") & (events.tags["node"] == "node-0005"))
    codes = sorted(set(xids.fields["code"].tolist()))
    assert codes == [13, 31] and set(xids.fields["gpu"].tolist()) == {6}
    assert len(xids) == 7


# ---- node compound --------------------------------------------------------------------------

COMPOUND = [p for p in family_scenarios("node_compound") if load_scenario(p).faults]


@pytest.mark.parametrize("path", COMPOUND, ids=ids(COMPOUND))
def test_small_pieces_on_one_node_are_one_label_and_slow_the_job_a_few_percent(
    path: Path,
) -> None:
    scenario = load_scenario(path)
    sim, frames = run(path)
    [label] = sim.truth
    assert (label.fault_type, label.component) == ("node_compound", "node")
    pieces = scenario.faults
    assert len(pieces) >= 4 and len({f.type for f in pieces}) >= 3
    assert len({f.gpu for f in pieces if f.type != "ib_flapping"}) >= 3  # over its GPUs
    comm_share = next(job.comm_fraction for job in scenario.jobs if job.name == label.job)
    for piece in pieces:  # each small: 3 % of its rank's step at most
        assert float(piece.params.get("compute", 1.0)) <= 1.03
        assert (float(piece.params.get("comm", 1.0)) - 1) * comm_share <= 0.03
        assert piece.params.get("width", 16) == 16
    onset = (label.onset_ns - sim.start_ns) / 1e9
    table = steps(frames, label.job)
    clean = steps(run(path, variant="no_faults")[1], label.job)
    window = (onset + 20, sim.duration_s)
    slowed = median_step(sim, table, *window) / median_step(sim, clean, *window)
    assert 1.02 <= slowed <= 1.06, slowed


@pytest.mark.parametrize("path", COMPOUND, ids=ids(COMPOUND))
def test_the_port_piece_is_a_noisy_port_not_a_bad_cable(path: Path) -> None:
    # No louder than the quirky fleet's healthy noisy NIC (0.1 symbol, 0.02 receive errors a
    # second), and the link never retrains or goes down.
    [port] = [f for f in load_scenario(path).faults if f.type == "ib_flapping"]
    assert float(port.params["symbol_rate"]) <= 0.1 and float(port.params["rcv_rate"]) <= 0.02
    assert float(port.params["flap_every_s"]) == 0 and float(port.params["comm"]) == 1.0
    sim, frames = run(path)
    [label] = sim.truth
    ports = concat_frames(frames["ib_port"])
    mine = ports.tags["node"] == label.node
    for counter in ("link_error_recovery", "link_downed"):
        assert np.ptp(ports.fields[counter][mine]) == 0, counter


BLIPS = [p for p in COMPOUND if load_scenario(p).benign]


def test_three_compounds_have_a_loud_harmless_blip_elsewhere() -> None:
    assert len(BLIPS) == 3
    assert {b.kind for p in BLIPS for b in load_scenario(p).benign} == {"ecc_bursts", "app_xid"}
    assert any(load_scenario(p).quirks.share > 0 for p in BLIPS)


@pytest.mark.parametrize("path", BLIPS, ids=ids(BLIPS))
def test_the_loud_blip_is_on_another_node_of_the_job_unlabelled_and_does_not_slow_it(
    path: Path,
) -> None:
    scenario = load_scenario(path)
    sim, frames = run(path)
    [label] = sim.truth  # the compound's: the blip has none
    job = next(j for j in sim.cluster.jobs if j.name == label.job)
    onset = (label.onset_ns - sim.start_ns) / 1e9
    [node] = {str(b.node) for b in scenario.benign}
    assert node in job.nodes and node != label.node
    assert all(abs(b.start_s - onset) <= 30 for b in scenario.benign)  # at the same time
    # Loud: the fleet's most corrected-ECC GPU by far, or repeated application XIDs.
    xid_nodes = [
        str(n)
        for f in frames["event"]
        for n, k in zip(f.tags["node"], f.tags["kind"], strict=True)
        if k == "xid"
    ]
    gpus = concat_frames(frames["gpu"])
    ecc: dict[tuple[str, str], float] = defaultdict(float)
    counted = gpus.fields["ecc_corrected_volatile"]
    for n, g, value in zip(gpus.tags["node"], gpus.tags["gpu"], counted, strict=True):
        ecc[(n, g)] = max(ecc[(n, g)], float(value))
    for blip in scenario.benign:
        if blip.kind == "ecc_bursts":
            mine = ecc.pop((node, str(blip.gpu)))
            assert mine >= 300 and mine > 5 * max(ecc.values())
        else:
            assert set(xid_nodes) == {node} and len(xid_nodes) >= 5
    # Harmless: the blip alone leaves the job's steps as they are without it.
    window = (onset + 20, sim.duration_s)
    clean_sim, clean = run(path, variant="no_faults")
    blip_sim, blip_only = run(path, variant="benign_only")
    ratio = median_step(blip_sim, steps(blip_only, label.job), *window) / median_step(
        clean_sim, steps(clean, label.job), *window
    )
    assert abs(ratio - 1) < 0.002, ratio


# ---- quirky fleet ---------------------------------------------------------------------------

QUIRKY = [p for p in ALL if load_scenario(p).quirks.share > 0]


@pytest.mark.parametrize("path", QUIRKY, ids=ids(QUIRKY))
def test_a_third_of_the_nodes_carry_quirks_never_the_faulty_one(path: Path) -> None:
    scenario = load_scenario(path)
    for seed in (7, 8, 9):
        sim = Simulation(scenario, seed=seed)
        quirky = defaultdict(set)
        for quirk in sim.quirks:
            quirky[quirk.node].add(quirk.kind)
        assert len(quirky) == round(len(sim.cluster.nodes) / 3)
        assert all(len(kinds) == scenario.quirks.kinds_per_node for kinds in quirky.values())
        assert set().union(*quirky.values()) <= set(FLEET_QUIRKS)
        faulty = {label.node for label in sim.truth if label.node}
        assert not faulty & set(quirky) and set(scenario.quirks.spare) == faulty


def test_quirks_show_in_the_telemetry_of_their_nodes() -> None:
    path = named("quirky_fleet", "benign_mixed_16n_all_kinds")
    sim, frames = run(path, 600)
    quirky = {q.node for q in sim.quirks}
    gpus = concat_frames(frames["gpu"])
    temp = defaultdict(list)
    for node, value in zip(gpus.tags["node"], gpus.fields["temperature_celsius"], strict=True):
        temp[node in quirky].append(value)
    assert np.mean(temp[True]) > np.mean(temp[False]) + 2  # every one of them runs hot
    ecc = {q.node for q in sim.quirks if q.kind == "ecc_bursts_gpu"}
    counted = gpus.fields["ecc_corrected_volatile"]
    last = {node: counted[gpus.tags["node"] == node].max() for node in set(gpus.tags["node"])}
    assert min(last[node] for node in ecc) > 0


# ---- the scenario file's new keys -----------------------------------------------------------


def _parse(**extra: Any) -> Scenario:
    raw = {"cluster": {"nodes": 4}, "job": [{"name": "j", "nodes": 2}], **extra}
    return parse_scenario(raw, "t")


def test_new_keys_are_off_by_default() -> None:
    scenario = _parse()
    job = scenario.jobs[0]
    assert (job.checkpoint_marked, job.nodes_list) == (False, ())
    assert scenario.benign == () and scenario.quirks.share == 0
    assert scenario.evaluation.control_of == ""
    assert [j.nodes for j in Simulation(scenario).cluster.jobs] == [("node-0001", "node-0002")]


def test_bad_new_keys_are_refused_with_the_key_named() -> None:
    with pytest.raises(ScenarioError, match=r"\[\[benign\]\] #1.kind"):
        _parse(benign=[{"kind": "meteor", "start_s": 1}])
    with pytest.raises(ScenarioError, match="code"):
        _parse(benign=[{"kind": "app_xid", "node": "node-0001", "start_s": 1, "code": 79}])
    with pytest.raises(ScenarioError, match="node"):
        _parse(benign=[{"kind": "ecc_bursts", "node": "node-0009", "start_s": 1}])
    with pytest.raises(ScenarioError, match="job"):
        _parse(benign=[{"kind": "congestion", "job": "x", "start_s": 1}])
    with pytest.raises(ScenarioError, match="nodes_list"):
        _parse(job=[{"name": "j", "nodes": 2, "nodes_list": ["node-0001"]}])
    with pytest.raises(ScenarioError, match="evaluation"):
        _parse(evaluation={"pair": "x"})
    one = {"nodes": 1, "nodes_list": ["node-0001"]}
    overlapping = [{"name": "a", "end_s": 100, **one}, {"name": "b", "start_s": 50, **one}]
    with pytest.raises(ValueError, match="overlap in time on node-0001"):
        Simulation(_parse(job=overlapping))


# ---- the harness: every label of a job, and the moving-node pairs ----------------------------


def _label(node: str, onset_s: float, job: str = "j", component: str = "gpu") -> Any:
    return SimpleNamespace(node=node, component=component, index="1", job=job, expect="hardware",
                           fault_type="fail_slow_gpu", fault_class="implicit",
                           onset_ns=int(onset_s * 1e9))  # fmt: skip


def _event(at_s: float, *nodes: str, job: str = "j", severity: str = "warning") -> Any:
    suspects = [SimpleNamespace(node=n, component="gpu", index="1") for n in nodes]
    return SimpleNamespace(time_ns=int(at_s * 1e9), job=job, suspects=suspects,
                           severity=severity, trigger="regression")  # fmt: skip


def test_a_second_fault_is_matched_to_an_event_after_its_own_onset() -> None:
    first, second = _label("n1", 100), _label("n2", 160)
    # The first fault's event, a repeat of it after the second onset, then the second's.
    events = [_event(140, "n1"), _event(170, "n1"), _event(200, "n2")]
    matches, used = eval_harness.match_labels([second, first], events)
    answers = [(m.label.node, m.event and m.event.time_ns // 10**9, m.correct) for m in matches]
    assert answers == [
        ("n1", 140, True), ("n2", 200, True)
    ]  # fmt: skip
    assert used == {0, 2}  # the repeat is a false event, not the second fault's answer


def test_a_first_fault_without_an_event_does_not_take_the_seconds() -> None:
    first, second = _label("n1", 100), _label("n2", 160)
    matches, _ = eval_harness.match_labels([first, second], [_event(180, "n2")])
    assert [(m.label.node, m.event is not None, m.correct) for m in matches] == [
        ("n1", False, False), ("n2", True, True)
    ]  # fmt: skip


def test_a_single_label_is_scored_as_before_and_a_revision_is_counted() -> None:
    label = _label("n1", 100)
    events = [_event(120), _event(150, "n9"), _event(200, "n1")]  # none, wrong, right
    matches, used = eval_harness.match_labels([label], events)
    [match] = matches
    assert match.event is events[0] and not match.correct and match.revision is events[2]
    assert used == {0}
    result = eval_harness.score_scenario("s", "reflex", [label], events, 1.0)
    assert result.faults[0].named_later and result.false_events == 2
    summary = eval_harness.summarize("reflex", [result])
    assert summary.top1 == 0.0 and summary.named_later == "1/1"


def test_an_escalation_of_the_named_part_is_right_and_strict_precision_counts_answers() -> None:
    label = _label("n1", 100)
    events = [
        _event(120, "n1"),  # the warning that names the part
        _event(180, "n1", severity="critical"),  # its escalation: right, not a second incident
        _event(190, "n1"),  # a repeat at the same severity: false
    ]
    right: set[int] = set()
    _, used = eval_harness.match_labels([label], events, right)
    assert used == right == {0, 1}
    wrong_first = [_event(120, "n9"), _event(200, "n1")]
    result = eval_harness.score_scenario("s", "reflex", [label], wrong_first, 1.0)
    summary = eval_harness.summarize("reflex", [result])
    assert (summary.precision, summary.strict_precision) == (0.5, 0.0)


def test_moving_pairs_compare_job_b_with_and_without_history() -> None:
    def result(name: str, at_s: float | None, node: str) -> eval_harness.ScenarioResult:
        label = _label("n1", 1000, job="b")
        events = [] if at_s is None else [_event(at_s, node, job="b")]
        run = eval_harness.score_scenario(name, "reflex", [_label("n1", 100, "a"), label],
                                          events, 1.0)  # fmt: skip
        run.seed = 8
        return run

    rows = eval_harness.moving_pairs(
        [result("m", 1030, "n1"), result("m_control", 1090, "n2"), result("other", None, "n1")],
        {"m_control": ("m", "b")},
    )
    [row] = rows
    assert (row.scenario, row.seed, row.ttl_history_s, row.ttl_clean_s) == ("m", 8, 30.0, 90.0)
    assert (row.top1_history, row.top1_clean) == (True, False)
