"""Two real InfluxDB servers, each holding half of a simulated fleet (as two rack groups' agents
would write them), give `reflex flow` the same events as one server holding the whole fleet:
polled, and read by the push source's Flux backfill."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_flow_influx import SECONDS, simulated_lines, write_lines

from reflex_localize.flows.io.influx_source import InfluxSource
from reflex_localize.flows.io.sinks import read_events
from reflex_localize.flows.runner import RunResult, run_in_process
from reflex_localize.influx.local_server import InfluxServer, free_port, start_influxdb
from reflex_localize.schemas.line_file import raw_tag
from reflex_localize.shell.reject_summary import read_reject_counts

pytestmark = [pytest.mark.influx, pytest.mark.slow]
WHOLE, HALF = "fleet-whole", "fleet-half"
CLI = [sys.executable, "-c", "from reflex_localize.shell.cli import main; main()", "flow"]


@pytest.fixture(scope="module")
def second_server() -> Iterator[InfluxServer]:
    with start_influxdb() as server:
        yield server


@pytest.fixture(scope="module")
def fleet(influx: InfluxServer, second_server: InfluxServer) -> tuple[int, int, RunResult]:
    """The whole fleet in one bucket of the first server, half of its nodes in a bucket of
    each server; the span written, and the flow's outcome over the whole bucket."""
    lines, start = simulated_lines(SECONDS)
    nodes = sorted({node for line in lines if (node := raw_tag(line, "node")) is not None})
    first_half = set(nodes[: len(nodes) // 2])
    influx.create_bucket(WHOLE)
    write_lines(influx, WHOLE, lines)
    influx.create_bucket(HALF)
    second_server.create_bucket(HALF)
    # Lines without a node tag (none in this capture) would go to the first instance.
    write_lines(influx, HALF, [line for line in lines if raw_tag(line, "node") in first_half])
    write_lines(
        second_server, HALF, [line for line in lines if raw_tag(line, "node") not in first_half]
    )
    stop = start + SECONDS * 10**9
    whole = InfluxSource(influx.settings(WHOLE), n_shards=3, start_ns=start, stop_ns=stop,
                         clock=lambda: stop + 60 * 10**9)  # fmt: skip
    one = run_in_process(whole)
    assert one.events, "the XID 79 must be localized"
    return start, stop, one


def two_instances_config(tmp_path: Path, first: InfluxServer, second: InfluxServer) -> Path:
    """[influx] is the first server (its token serves the instance that names none); the
    second instance has a token of its own."""
    tokens = {}
    for name, server in (("first", first), ("second", second)):
        tokens[name] = tmp_path / f"{name}.token"
        tokens[name].write_text(server.token)
        tokens[name].chmod(0o600)
    config = tmp_path / "flow.toml"
    config.write_text(
        f'[influx]\nurl = "{first.url}"\norg = "{first.org}"\nbucket = "{HALF}"\n'
        f'token_file = "{tokens["first"]}"\n'
        f'[[telemetry_instances]]\nurl = "{first.url}"\n'
        f'[[telemetry_instances]]\nurl = "{second.url}"\norg = "{second.org}"\n'
        f'token_file = "{tokens["second"]}"\n'
    )
    return config


@pytest.mark.parametrize("source", ["influx", "influx-push"])
def test_reflex_flow_over_two_instances_each_with_half_the_fleet_finds_the_events_of_one(
    tmp_path: Path,
    influx: InfluxServer,
    second_server: InfluxServer,
    fleet: tuple[int, int, RunResult],
    source: str,
) -> None:
    """``influx-push``: a stream that never came, so every window is the Flux backfill."""
    start, stop, one = fleet
    out = tmp_path / "out"
    command = [*CLI, "--source", source, "--sink", "files", "--out", str(out), "--no-recovery",
               "--config", str(two_instances_config(tmp_path, influx, second_server)),
               "--shards", "3", "--cluster", "sim", "--start-ns", str(start),
               "--stop-ns", str(stop)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFLEX_INFLUX_")}
    env |= {"REFLEX_PUSH_TOKEN": "unused", "REFLEX_PUSH_LISTEN": f"127.0.0.1:{free_port()}"}
    done = subprocess.run(command, env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert [e.to_json() for e in read_events(out / "events.jsonl")] == [
        e.to_json() for e in one.events
    ]
    rejects: Counter[str] = Counter()
    for (_, reason), count in read_reject_counts(out / "errors.jsonl").items():
        rejects[reason] += count
    assert rejects == one.error_counts
