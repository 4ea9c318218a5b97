"""The evaluation families have the shape they claim (README in simulator/scenarios/families).

No detection is asserted here: these tests check the telemetry, not Reflex. Each scenario
loads and obeys the schema; launch stragglers are slow from their job's first step; small
groups have one or two data-parallel ranks per stage; imbalance is there from step one;
partial deployments lack exactly the telemetry they say they lack.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from reflex_localize.schemas.frame import Frame, validate_frame
from reflex_localize.shell import eval as eval_command
from reflex_localize.shell import eval_harness
from reflex_localize.simulator import Simulation, family_names, family_scenarios, load_scenario
from reflex_localize.simulator.deployment import AGENT_EVENT_SOURCES, AGENT_MEASUREMENTS
from reflex_localize.simulator.scenario import Scenario, ScenarioError, parse_scenario
from reflex_localize.simulator.tables import concat_frames

FAMILIES = {"launch_straggler": "ls_", "small_group": "sg_", "static_imbalance": "si_",
            "partial_deployment": "pd_"}  # fmt: skip
ALL = [path for family in FAMILIES for path in family_scenarios(family)]
# Faults whose slowdown is there from the first second of the episode (a thermal fault has to
# heat up first).
IMMEDIATE = {"fail_slow_gpu", "power_brake", "host_contention", "ib_flapping", "pcie_downgrade"}


def ids(paths: list[Path]) -> list[str]:
    return [path.stem for path in paths]


@cache
def run(path: Path, seconds: int | None = None, without_faults: bool = False) -> tuple:
    """(simulation, frames per measurement) for the first ``seconds`` (all when None)."""
    scenario = load_scenario(path)
    if without_faults:
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
    table = concat_frames(frames["train_step"])
    return table.take(table.tags["job"] == job)


def first_step(table: Frame) -> Frame:
    return table.take(table.fields["step"] == table.fields["step"].min())


def family_of(path: Path) -> str:
    return path.parent.name


# ---- every family ---------------------------------------------------------------------------


def test_the_four_families_and_their_names() -> None:
    assert set(FAMILIES) <= set(family_names())  # other families: their own tests
    names = [load_scenario(path).name for path in ALL]
    assert len(names) == len(set(names))
    for path, name in zip(ALL, names, strict=True):
        assert name.startswith(FAMILIES[family_of(path)]), name


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_has_several_layouts_a_benign_case_and_short_and_long_steps(
    family: str,
) -> None:
    scenarios = [load_scenario(path) for path in family_scenarios(family)]
    assert len(scenarios) >= 6
    assert any(not s.faults for s in scenarios), "a benign-only case counts false events"
    layouts = {(job.nodes, job.pp) for s in scenarios for job in s.jobs}
    assert len(layouts) >= 4
    step_s = [job.step_s for s in scenarios for job in s.jobs]
    assert min(step_s) <= 2.0 and max(step_s) >= 25.0  # shorter and longer than a 10 s window


@pytest.mark.parametrize("path", ALL, ids=ids(ALL))
def test_scenario_obeys_the_schema_and_labels_its_answer(path: Path) -> None:
    first_steps = max(job.start_s + job.step_s for job in load_scenario(path).jobs)
    sim, frames = run(path, int(first_steps) + 20)
    for frame in (f for group in frames.values() for f in group):
        assert not validate_frame(frame)[1], frame.measurement
    assert "train_step" in frames and "job_membership" in frames
    jobs = {job.name for job in sim.cluster.jobs}
    for label in sim.truth:
        assert label.expect in ("hardware", "no_hardware_fault")
        if label.expect == "hardware":
            assert label.job in jobs
            assert label.node in {node for job in sim.cluster.jobs for node in job.nodes}
            assert label.component in ("gpu", "nic", "host", "node")


# ---- launch stragglers ----------------------------------------------------------------------


LAUNCH = [p for p in family_scenarios("launch_straggler") if load_scenario(p).faults]


@pytest.mark.parametrize("path", LAUNCH, ids=ids(LAUNCH))
def test_launch_fault_is_there_from_the_jobs_first_step(path: Path) -> None:
    scenario = load_scenario(path)
    [fault] = scenario.faults
    assert fault.from_job_start and fault.onset_s == 0
    job = next(j for j in scenario.jobs if j.name == fault.job)
    sim, frames = run(path, int(job.start_s + 3 * job.step_s + 40))
    [label] = sim.truth
    assert label.onset_ns == sim.start_ns + int(job.start_s * 1e9)
    healthy = run(path, int(job.start_s + 3 * job.step_s + 40), without_faults=True)[1]
    faulty, clean = steps(frames, job.name), steps(healthy, job.name)
    if fault.type in IMMEDIATE:
        # The job's very first step is already slower than the same job without the fault.
        slow = first_step(faulty).fields["step_time_seconds"].max()
        assert slow > 1.1 * first_step(clean).fields["step_time_seconds"].max()
    else:
        # A GPU with broken cooling needs under a minute of load to heat up and throttle.
        late = faulty.fields["step_time_seconds"][-1]
        assert late > 1.1 * clean.fields["step_time_seconds"][-1]


def test_the_issues_launch_straggler_computes_45_s_against_20_s_in_47_s_steps() -> None:
    for path in (
        *[p for p in family_scenarios("launch_straggler") if p.stem == "gpu_slow_47s"],
        *[p for p in family_scenarios("partial_deployment") if p.stem == "hook_only_launch_47s"],
    ):
        frames = run(path, 300)[1]
        table = steps(frames, "train")
        slow = (table.tags["node"] == "node-0006") & (table.tags["rank"] == "43")
        # rank 43: stage 2 (ranks 32-47), replica 1 (ranks 40-47), tensor rank 3 = GPU 3.
        compute = table.fields["compute_seconds"]
        assert 43 <= np.median(compute[slow]) <= 47
        assert 19 <= np.median(compute[~slow]) <= 22
        assert 45 <= np.median(table.fields["step_time_seconds"]) <= 49
        assert first_step(table).fields["compute_seconds"].max() > 43


# ---- steps follow step_s --------------------------------------------------------------------


BENIGN = [p for p in ALL if not load_scenario(p).faults]


@pytest.mark.parametrize("path", BENIGN, ids=ids(BENIGN))
def test_healthy_step_times_follow_step_s(path: Path) -> None:
    frames = run(path)[1]
    for job in load_scenario(path).jobs:
        median = float(np.median(steps(frames, job.name).fields["step_time_seconds"]))
        assert 0.97 * job.step_s <= median <= 1.15 * job.step_s, (job.name, median)


# ---- small groups ---------------------------------------------------------------------------


SMALL = [p for p in family_scenarios("small_group") if load_scenario(p).faults]


@pytest.mark.parametrize("path", SMALL, ids=ids(SMALL))
def test_small_group_jobs_have_one_or_two_ranks_per_stage(path: Path) -> None:
    sim, frames = run(path, int(max(job.start_s for job in load_scenario(path).jobs)) + 10)
    [label] = sim.truth
    job = next(j for j in sim.cluster.jobs if j.name == label.job)
    assert job.dp in (1, 2)
    members = concat_frames(frames["job_membership"])
    mine = members.take(members.tags["job"] == job.name)
    for stage in range(job.pp):
        in_stage = mine.fields["pp_rank"] == stage
        assert len(np.unique(mine.fields["dp_rank"][in_stage])) == job.dp
        assert len(np.unique(mine.tags["node"][in_stage])) == job.dp  # tp=8: a node per rank


# ---- static imbalance -----------------------------------------------------------------------


IMBALANCED = [p for p in family_scenarios("static_imbalance") if load_scenario(p).faults]


@pytest.mark.parametrize("path", IMBALANCED, ids=ids(IMBALANCED))
def test_imbalance_is_labelled_not_hardware_and_present_from_step_one(path: Path) -> None:
    scenario = load_scenario(path)
    [fault] = scenario.faults
    job = next(j for j in scenario.jobs if j.name == fault.job)
    sim, frames = run(path, int(job.start_s + job.step_s * 2 + 20))
    [label] = sim.truth
    assert label.expect == "no_hardware_fault" and label.node == ""
    assert label.fault_type in ("pipeline_imbalance", "seqlen_imbalance")
    assert label.onset_ns == sim.start_ns + int(job.start_s * 1e9)
    table = first_step(steps(frames, job.name))
    spec = next(j for j in sim.cluster.jobs if j.name == job.name)
    compute = table.fields["compute_seconds"]
    if fault.type == "pipeline_imbalance":
        last = spec.pp_rank[table.tags["rank"].astype(int)] == spec.pp - 1
        ratio = compute[last].mean() / compute[~last].mean()
        assert ratio > 0.95 * float(fault.params["last_stage_factor"])
    else:
        # The replicas' costs differ from the first step; a single replica's ranks agree.
        replica = spec.dp_rank[table.tags["rank"].astype(int)]
        means = [compute[replica == r].mean() for r in range(spec.dp)]
        assert spec.dp == 1 or max(means) / min(means) > 1.02


def test_step_time_follows_the_data_when_there_is_one_replica() -> None:
    [path] = [p for p in family_scenarios("static_imbalance") if p.stem == "seqlen_dp1_pp2_8s"]
    frames = run(path)[1]
    table = steps(frames, "train")
    per_step = defaultdict(list)
    for step, value in zip(table.fields["step"], table.fields["compute_seconds"], strict=True):
        per_step[int(step)].append(value)
    spread = [np.ptp(v) / np.mean(v) for v in per_step.values()]
    means = [np.mean(v) for v in per_step.values()]
    assert np.median(spread) < 0.1  # every rank alike within a step (the last stage a bit more)
    assert np.std(means) / np.mean(means) > 0.2  # the steps differ with their batches


# ---- partial deployments --------------------------------------------------------------------


PARTIAL = family_scenarios("partial_deployment")


def _agent_rows(frames: dict[str, list[Frame]]) -> dict[str, set[str]]:
    """Per agent measurement (events by source), the nodes it has rows for."""
    nodes: dict[str, set[str]] = defaultdict(set)
    for measurement, group in frames.items():
        for frame in group:
            if measurement in AGENT_MEASUREMENTS:
                nodes[measurement] |= set(frame.tags["node"])
            elif measurement == "event":
                for source, node in zip(frame.tags["source"], frame.tags["node"], strict=True):
                    if source in AGENT_EVENT_SOURCES:
                        nodes[f"event/{source}"].add(node)
    return nodes


@pytest.mark.parametrize("path", PARTIAL, ids=ids(PARTIAL))
def test_partial_deployment_lacks_exactly_what_it_says(path: Path) -> None:
    scenario = load_scenario(path)
    sim, frames = run(path)
    every = {node.name for node in sim.cluster.nodes}
    down = every if scenario.agent_down == ("all",) else set(scenario.agent_down)
    agent = _agent_rows(frames)
    if down == every:
        assert not agent, "a hook-only cluster has no agent measurements"
    for measurement, nodes in agent.items():
        assert not nodes & down, measurement
    if down != every:
        assert agent["gpu"] == agent["host"] == every - down
    assert {n for f in frames["train_step"] for n in f.tags["node"]} == {
        n for job in sim.cluster.jobs for n in job.nodes
    }
    for job in scenario.jobs:
        members = [f for f in frames["job_membership"] if f.tags["job"][0] == job.name]
        for frame in members:
            assert not set(job.membership_omits) & set(frame.fields)
            assert {"dp_rank", "pp_rank", "tp_rank", "world_size"} <= set(frame.fields)


def test_agent_down_on_the_faulty_node_is_the_faulty_node() -> None:
    [path] = [p for p in PARTIAL if p.stem == "agent_down_on_faulty_node_8s"]
    sim = Simulation(load_scenario(path), seed=7)
    assert sim.scenario.agent_down == (sim.truth[0].node,)


def test_hook_only_crash_leaves_only_training_events() -> None:
    [path] = [p for p in PARTIAL if p.stem == "hook_only_xid79"]
    frames = run(path)[1]
    events = concat_frames(frames["event"])
    assert set(events.tags["source"]) == {"training"}
    assert {"nccl_timeout", "process_exit"} == set(events.tags["kind"])


# ---- the scenario file's new keys -----------------------------------------------------------


def _parse(**extra: object) -> Scenario:
    raw = {"cluster": {"nodes": 2}, "job": [{"name": "j", "nodes": 2}], **extra}
    return parse_scenario(raw, "t")


def test_new_keys_default_to_the_old_behaviour() -> None:
    scenario = _parse()
    assert scenario.agent_down == () and scenario.jobs[0].membership_omits == ()


def test_bad_new_keys_are_refused() -> None:
    with pytest.raises(ScenarioError, match="membership_omits"):
        parse_scenario({"job": [{"name": "j", "nodes": 2, "membership_omits": ["rank"]}]}, "t")
    with pytest.raises(ScenarioError, match="agent_down"):
        _parse(telemetry={"agent_down": "all"})
    with pytest.raises(ScenarioError, match="telemetry"):
        _parse(telemetry={"agent": False})
    with pytest.raises(ValueError, match="no nodes"):
        Simulation(_parse(telemetry={"agent_down": ["node-0009"]}))
    orphan = {"type": "fail_slow_gpu", "node": "node-0003", "onset_s": 0, "from_job_start": True}
    with pytest.raises(ValueError, match="from_job_start"):
        Simulation(parse_scenario({"cluster": {"nodes": 4}, "job": [{"name": "j", "nodes": 2}],
                                   "fault": [orphan]}, "t"))  # fmt: skip


# ---- reflex eval --family -------------------------------------------------------------------


def test_a_crashing_run_is_a_finding_not_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(*args: object, **kwargs: object) -> None:
        raise KeyError("profile")

    monkeypatch.setattr(eval_harness, "run_scenario", crash)
    [path] = [p for p in LAUNCH if p.stem == "gpu_slow_47s"]
    result = eval_harness.run_family_scenario(path, "reflex", 8)
    assert result.crashed == "KeyError: 'profile'" and result.seed == 8
    assert [f.detected for f in result.faults] == [False]
    [row] = eval_command.detail_rows([result])
    assert row["verdict"].startswith("crashed") and row["expected"] == "node-0006 gpu 3"
    summary = eval_harness.summarize("reflex", [result])
    assert summary.crashed == 1 and summary.recall == 0.0


def test_detail_rows_tell_silence_from_a_no_hardware_answer() -> None:
    sim = Simulation(load_scenario(IMBALANCED[0]), seed=7)
    [label] = sim.truth
    said = SimpleNamespace(time_ns=label.onset_ns + 30 * 10**9, suspects=[])
    rows = eval_command.detail_rows([
        eval_harness.ScenarioResult("a", "reflex", 1.0, False, seed=7,
                                    matches=[eval_harness.LabelMatch(label, None, True)]),
        eval_harness.ScenarioResult("b", "reflex", 1.0, False, seed=7,
                                    matches=[eval_harness.LabelMatch(label, said, True)]),  # type: ignore[arg-type]
    ])  # fmt: skip
    assert [(r["scenario"], r["verdict"], r["TTL s"]) for r in rows] == [
        ("a", "silent", "n/a"), ("b", "answered", "30.00")
    ]  # fmt: skip


def test_eval_refuses_an_unknown_family() -> None:
    outcome = CliRunner().invoke(eval_command.command, ["--family", "nope"])
    assert outcome.exit_code != 0 and "no scenario family" in outcome.output
