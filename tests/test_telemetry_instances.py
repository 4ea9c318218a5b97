"""``[[telemetry_instances]]`` of a config file: each instance's own keys, ``[influx]``'s for the
rest, and a clear error for a table that would lose or repeat a rack group's telemetry."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_localize.influx.config import ConfigError, load_config
from reflex_localize.influx.instances import telemetry_instances

# One instance, with and without a trailing slash.
TWICE = '[[telemetry_instances]]\nurl = "http://a:8086/"\n'
TWICE += '[[telemetry_instances]]\nurl = "http://a:8086"\n'
INFLUX = '[influx]\nurl = "http://a:8086"\nbucket = "telemetry"\n'


def instances(tmp_path: Path, tables: str) -> list[tuple[str, str, str]]:
    path = tmp_path / "flow.toml"
    path.write_text(tables + INFLUX)  # tables first: a bare key too is top-level
    config = load_config(path, env={"REFLEX_INFLUX_TOKEN": "token-a"})
    return [(s.url, s.bucket, s.token) for s in telemetry_instances(config)]


def test_without_tables_telemetry_is_read_from_influx(tmp_path: Path) -> None:
    assert instances(tmp_path, "") == [("http://a:8086", "telemetry", "token-a")]


def test_each_table_takes_its_own_token_file_and_influxs_other_keys(tmp_path: Path) -> None:
    token = tmp_path / "b.token"
    token.write_text("token-b\n")
    token.chmod(0o600)
    tables = '[[telemetry_instances]]\nurl = "http://a:8086"\n'
    tables += f'[[telemetry_instances]]\nurl = "http://b:8086"\ntoken_file = "{token}"\n'
    assert instances(tmp_path, tables) == [
        ("http://a:8086", "telemetry", "token-a"),
        ("http://b:8086", "telemetry", "token-b"),
    ]


@pytest.mark.parametrize(
    ("tables", "problem"),
    [
        ('[[telemetry_instances]]\norg = "x"\n', "#1.url: each instance needs its url"),
        ('[[telemetry_instances]]\nurl = "http://b"\ntoken = "t"\n', "#1.token: tokens are not"),
        ('[[telemetry_instances]]\nurl = "http://b"\nport = 1\n', "#1.port: unknown key"),
        (TWICE, "listed twice"),
        ("telemetry_instances = []\n", "expected one or more"),
    ],
)
def test_a_wrong_table_is_named(tmp_path: Path, tables: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        instances(tmp_path, tables)
