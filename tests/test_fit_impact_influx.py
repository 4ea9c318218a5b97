"""`reflex fit-impact --last` learns from InfluxDB history what it learns from the same
telemetry simulated: the path a nightly refit takes (deploy/reflex-fit-impact.timer), through
the real InfluxDB, which no test read before."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_flow_influx import write_lines

from reflex_localize.flows.impact.fit import fit_impact
from reflex_localize.flows.impact.model import ImpactModel
from reflex_localize.influx.local_server import InfluxServer
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.shell.fit_impact import command, rows_from_scenarios
from reflex_localize.simulator import Simulation, load_scenario

pytestmark = [pytest.mark.influx, pytest.mark.slow]
SCENARIO = Path(__file__).resolve().parent / "scenarios" / "nvlink_errors_from_start.toml"
SEED = 11


def test_a_refit_over_the_last_hour_of_influxdb_learns_the_simulated_cost(
    influx: InfluxServer, influx_bucket: str, tmp_path: Path
) -> None:
    scenario = load_scenario(str(SCENARIO))
    # The job ran over the last quarter of an hour: inside --last 1h, over before the refit.
    start_ns = (time.time_ns() - 900 * 10**9) // 10**10 * 10**10
    simulation = Simulation(dataclasses.replace(scenario, start_ns=start_ns), seed=SEED)
    lines = [line for chunk in simulation.chunks(10.0) for f in chunk for line in encode_frame(f)]
    write_lines(influx, influx_bucket, lines)

    out = tmp_path / "impact.json"
    args = ["--influx-url", influx.url, "--org", influx.org, "--bucket", influx_bucket]
    result = CliRunner(env={"REFLEX_INFLUX_TOKEN": influx.token}).invoke(
        command, [*args, "--last", "1h", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    from_influx = ImpactModel.load(out)

    simulated = fit_impact(rows_from_scenarios([str(SCENARIO)], SEED))
    assert from_influx.provenance["rows"] == simulated.provenance["rows"] > 1000
    cost = dict(zip(from_influx.features, from_influx.coefficients, strict=True))
    expected = dict(zip(simulated.features, simulated.coefficients, strict=True))
    assert cost["nvlink_error_rate"] == pytest.approx(expected["nvlink_error_rate"], rel=0.05)
    assert cost["nvlink_error_rate"] > 0.005  # NVLink errors slow this fleet's rank
