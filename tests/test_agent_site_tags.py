"""Site tags from the agent's own configuration: ``[identity] rack`` and ``switch`` (or
``REFLEX_RACK``, ``REFLEX_SWITCH``) go on every point the agent writes, its self-metrics and the
training hooks' records included, and InfluxDB stores them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_collectors_agent import FIXTURES, FixedClock, decoded, write_config

from reflex_localize.collectors.agent import Agent
from reflex_localize.collectors.host import HostCollector
from reflex_localize.collectors.sinks import WriterSink
from reflex_localize.influx.config import load_config
from reflex_localize.schemas.codec import decode, encode
from reflex_localize.shell.collect import command

T0 = 1_767_225_600 * 10**9
SITE = '[identity]\nrack = "r12"\nswitch = "leaf-3"\n'


def config_with_site(tmp_path: Path) -> Path:
    path = write_config(tmp_path)
    path.write_text(path.read_text().replace("[identity]\n", SITE, 1))
    return path


def test_identity_takes_rack_and_switch_and_the_environment_overrides(tmp_path: Path) -> None:
    path = config_with_site(tmp_path)
    identity = load_config(path, env={}).identity
    assert (identity.rack, identity.switch) == ("r12", "leaf-3")
    assert load_config(path, env={"REFLEX_RACK": "r13"}).identity.site == {
        "rack": "r13",
        "switch": "leaf-3",
    }
    assert load_config(None, env={}).identity.site == {}


def test_every_point_of_a_run_carries_the_site_tags(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        command, ["--config", str(config_with_site(tmp_path)), "--once", "--stdout"]
    )
    assert result.exit_code == 0, result.output
    points = decoded(result.stdout)  # strictly decoded: a writer takes them
    assert {"host", "nic", "event", "reflex_collector"} <= {p.measurement for p in points}
    assert {(p.tags.get("rack"), p.tags.get("switch")) for p in points} == {("r12", "leaf-3")}


def test_a_rack_line_protocol_cannot_carry_is_refused(tmp_path: Path) -> None:
    path = config_with_site(tmp_path)
    path.write_text(path.read_text().replace('rack = "r12"', 'rack = "r12\\\\"'))
    result = CliRunner().invoke(command, ["--config", str(path), "--once", "--stdout"])
    assert result.exit_code != 0 and "[identity]" in result.output and "rack" in result.output


def test_site_tags_are_written_and_read_strictly() -> None:
    line = "host,cluster=c,node=n,rack=r12,switch=leaf-3 load1=0.5 1"
    assert encode(decode(line)) == line  # no carry_tags needed: declared site tags


@pytest.mark.influx
def test_influxdb_stores_the_agents_site_tags(
    influx: Any, influx_bucket: str, tmp_path: Path
) -> None:
    from reflex_localize.influx.writer import Writer

    writer = Writer(influx.url, influx.token, influx.org, influx_bucket, tmp_path / "spool")
    sink = WriterSink(writer, flush_interval_s=0.2)
    host = HostCollector("c1", "n1", proc_root=FIXTURES / "host" / "proc")
    agent = Agent([host], sink.emit, cluster="c1", node="n1", clock=FixedClock(T0),
                  site={"rack": "r12", "switch": "leaf-3"})  # fmt: skip
    produced = agent.run_once()
    sink.close()
    assert writer.stats.sent == len(produced) and writer.stats.rejected == 0
    rows = influx.query_rows(
        f'from(bucket: "{influx_bucket}") |> range(start: 0, stop: 2100-01-01T00:00:00Z) '
        '|> keep(columns: ["_measurement", "rack", "switch"]) |> group() '
        '|> distinct(column: "rack")'
    )
    assert [row["_value"] for row in rows] == ["r12"]
    count = influx.query_rows(
        f'from(bucket: "{influx_bucket}") |> range(start: 0, stop: 2100-01-01T00:00:00Z) '
        '|> filter(fn: (r) => r.switch != "leaf-3") |> count()'
    )
    assert count == []
