"""A refit impact model reaches the flow that is running, and the jobs that are running.

`reflex fit-impact` runs on a schedule (deploy/reflex-fit-impact.timer) while the flow and its
training jobs run for weeks. Before, the flow loaded the model once at start, and a job's
state carried the configuration it was created with inside every snapshot: a restart with a
new model, or new weights, reached only the jobs that started after it.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry, generate_latest

from reflex_localize.flows.flow_metrics import FlowMetrics
from reflex_localize.flows.impact.model import ImpactModel
from reflex_localize.flows.impact.model_file import ImpactModelFile
from reflex_localize.flows.judge.job_step import JobConfig, JobState
from reflex_localize.flows.localize import job_logic
from reflex_localize.flows.runner import run_in_process
from reflex_localize.shell.fit_impact import command as fit_impact
from reflex_localize.shell.flow import command as flow
from reflex_localize.shell.simulated_source import SimulatorSource

SCENARIO = Path(__file__).resolve().parent / "scenarios" / "nvlink_errors_from_start.toml"
# What node_compound's fleet learned NVLink errors cost (test_learned_explanations.py): with it,
# the scenario's rank slowed by its GPU's NVLink errors is told; with no cost, nothing is.
LEARNED = ImpactModel(("nvlink_error_rate", "temperature_high"), (0.016, 0.02), 0.0)
NOTHING_LEARNED = ImpactModel(("nvlink_error_rate", "temperature_high"), (0.0, 0.02), 0.0)


class RefitAt:
    """A clock for the model file that, at its ``at``-th reading, has the nightly refit
    replace the file: the refit lands while the job runs."""

    def __init__(self, path: Path, at: int) -> None:
        self.path, self.at, self.readings = path, at, 0

    def __call__(self) -> float:
        self.readings += 1
        if self.readings == self.at:
            LEARNED.save(self.path)
        return float(self.readings)  # one "second" a reading: every reading looks again


def test_a_refit_that_replaces_the_file_mid_job_is_taken(tmp_path: Path) -> None:
    path = tmp_path / "impact.json"
    NOTHING_LEARNED.save(path)
    # About 70 s into the job (three readings a window), before the rank has been slow for
    # the nine 8 s steps it takes. (A refit that lands much later tells nothing here: what the
    # GPU's NVLink errors count as evidence fades as its own history learns the trickle, and
    # by 100 s the model predicts under half of the rank's 6.5%.)
    clock = RefitAt(path, at=20)
    watched = ImpactModelFile(path, check_every_s=0.5, clock=clock)
    events = run_in_process(
        SimulatorSource(str(SCENARIO), 7, 1, 10.0), job_config=JobConfig(impact=watched)
    ).events
    assert watched.reloads == 1 and clock.readings > clock.at
    assert [(e.trigger, e.top.node, e.top.index) for e in events if e.top] == [
        ("straggler", "node-0004", "2")
    ]
    assert f"learned impact model (version {LEARNED.version})" in events[0].summary


def test_without_the_refit_the_same_run_tells_nothing(tmp_path: Path) -> None:
    path = tmp_path / "impact.json"
    NOTHING_LEARNED.save(path)
    watched = ImpactModelFile(path, check_every_s=0.5, clock=RefitAt(path, at=10**9))
    events = run_in_process(
        SimulatorSource(str(SCENARIO), 7, 1, 10.0), job_config=JobConfig(impact=watched)
    ).events
    assert [e for e in events if e.top] == []
    assert watched.reloads == 0


@pytest.mark.parametrize(
    "broken",
    ['{"features": ["nvlink_error_rate"], "coeffic', '{"features": ["no_such_signal"], '
     '"coefficients": [1.0], "intercept": 0.0}'],
)  # fmt: skip
def test_a_refit_that_cannot_be_loaded_keeps_the_model(tmp_path: Path, broken: str) -> None:
    path = tmp_path / "impact.json"
    LEARNED.save(path)
    now = [0.0]
    watched = ImpactModelFile(path, check_every_s=60.0, clock=lambda: now[0])
    path.write_text(broken)
    now[0] = 61.0
    assert watched.current() == LEARNED
    assert (watched.failed_loads, watched.reloads) == (1, 0)
    now[0] = 200.0  # the same broken file is not read again until it changes
    assert watched.current() == LEARNED and watched.failed_loads == 1


def test_a_model_file_gone_for_a_moment_keeps_the_model(tmp_path: Path) -> None:
    path = tmp_path / "impact.json"
    LEARNED.save(path)
    now = [0.0]
    watched = ImpactModelFile(path, clock=lambda: now[0])
    path.unlink()
    now[0] = 120.0
    assert watched.current() == LEARNED and watched.failed_loads == 0


def test_a_resumed_job_runs_under_the_running_flows_configuration() -> None:
    old = JobConfig(impact=NOTHING_LEARNED, cooldown_s=900.0)
    snapshot = job_logic(old)(JobState("train", old)).snapshot()
    # The snapshot carries the job's state, not the configuration (nor a fitted model).
    assert snapshot.config is None
    assert b"nvlink_error_rate" not in pickle.dumps(snapshot)
    new = JobConfig(impact=LEARNED, cooldown_s=600.0)
    resumed = job_logic(new)(pickle.loads(pickle.dumps(snapshot)))
    assert resumed.state.config is new and resumed.state.job == "train"


def test_a_snapshot_of_an_older_version_with_its_configuration_takes_the_new_one() -> None:
    old = JobConfig(impact=None)
    older_snapshot = pickle.loads(pickle.dumps(JobState("train", old)))  # config inside
    new = JobConfig(impact=LEARNED)
    assert job_logic(new)(older_snapshot).state.config is new


def test_fit_impact_keeps_each_version_beside_the_model(tmp_path: Path) -> None:
    out = tmp_path / "impact.json"
    args = ["--scenarios", str(SCENARIO), "--keep-versions", "--json", "--out", str(out)]
    result = CliRunner().invoke(fit_impact, args)
    assert result.exit_code == 0, result.output
    version = json.loads(result.output)["version"]
    assert ImpactModel.load(tmp_path / f"impact-{version}.json") == ImpactModel.load(out)
    assert not list(tmp_path.glob(".*partial"))  # written beside and renamed into place


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--last", "7x"], "is not a duration"),
        (["--last", "24h", "--start", "2026-11-01T00:00:00Z"], "not both"),
    ],
)
def test_fit_impact_last_is_checked(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(fit_impact, [*args, "--out", str(tmp_path / "m.json")])
    assert result.exit_code == 2 and message in result.output, result.output


def test_reflex_flow_refuses_a_model_it_cannot_load_before_any_process(tmp_path: Path) -> None:
    bad = tmp_path / "impact.json"
    bad.write_text('{"features": ["no_such_signal"], "coefficients": [1.0], "intercept": 0.0}')
    args = ["--source", "sim:demo", "--sink", "files", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(flow, [*args, "--impact-model", str(bad)])
    assert result.exit_code == 2
    assert "unknown signals ['no_such_signal']" in result.output


def test_the_flows_metrics_say_which_model_is_in_use_and_how_old(tmp_path: Path) -> None:
    path = tmp_path / "impact.json"
    NOTHING_LEARNED.save(path)
    now = [0.0]
    watched = ImpactModelFile(path, clock=lambda: now[0])
    wall = watched.written_ns / 1e9 + 3600.0  # an hour after the model was written
    registry = CollectorRegistry()
    FlowMetrics(registry, wall_clock=lambda: wall).watch_impact_model(watched)

    def metrics() -> dict[str, float]:
        text = generate_latest(registry).decode()
        return {
            key: float(value)
            for key, value in (line.rsplit(" ", 1) for line in text.splitlines())
            if key.startswith("reflex_flow_impact_model")
        }

    assert metrics() == {
        f'reflex_flow_impact_model_info{{version="{NOTHING_LEARNED.version}"}}': 1.0,
        "reflex_flow_impact_model_age_seconds": pytest.approx(3600.0),
        "reflex_flow_impact_model_reloads": 0.0,
        "reflex_flow_impact_model_failed_loads": 0.0,
    }
    LEARNED.save(path)
    now[0] = 61.0
    watched.current()
    wall = watched.written_ns / 1e9 + 5.0
    got = metrics()
    assert got[f'reflex_flow_impact_model_info{{version="{LEARNED.version}"}}'] == 1.0
    assert not any(NOTHING_LEARNED.version in key for key in got)  # one version at a time
    assert got["reflex_flow_impact_model_age_seconds"] == pytest.approx(5.0)
    assert got["reflex_flow_impact_model_reloads"] == 1.0
