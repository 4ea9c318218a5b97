"""`reflex demo`, the main job, on its embedded default (no database)."""

from __future__ import annotations

from pathlib import Path

import click
from click.testing import CliRunner

from reflex_localize.flows.io.sinks import read_events
from reflex_localize.shell.cli import main
from reflex_localize.simulator.scenario import scenario_names


def test_demo_localizes_the_injected_faults_and_writes_reports(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = CliRunner().invoke(main, ["demo", "--no-live", "--out", str(out)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert result.output.count("correct") == 4, result.output
    assert "wrong" not in result.output and "extra event" not in result.output
    events = read_events(out / "events.jsonl")
    assert len(events) == 4
    assert len(list((out / "reports").glob("*.html"))) == len(events)
    assert len(list((out / "reports").glob("*.png"))) == len(events)


TINY_SCENARIO = """name = "tiny"
duration_s = 60
[cluster]
nodes = 2
gpus_per_node = 8
[[job]]
name = "j"
nodes = 2
"""


def test_every_demo_option_says_what_it_does() -> None:
    from reflex_localize.shell.demo import command

    for param in command.params:
        assert isinstance(param, click.Option) and param.help, param.name
    result = CliRunner().invoke(main, ["demo", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    scenario_help = next(p.help for p in command.params if p.name == "scenario")
    assert all(name in str(scenario_help) for name in scenario_names())


def test_the_demo_takes_its_influx_url_from_the_flag_alone(tmp_path: Path) -> None:
    from reflex_localize.shell.demo import command

    url_help = next(str(p.help) for p in command.params if p.name == "influx_url")
    assert "REFLEX_INFLUX_URL" in url_help and "not read" in url_help
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    args = ["demo", "--no-live", "--scenario", str(scenario), "--out", str(tmp_path / "out")]
    nowhere = {"REFLEX_INFLUX_URL": "http://127.0.0.1:9", "REFLEX_INFLUX_TOKEN": "t"}
    result = CliRunner().invoke(main, args, env=nowhere)  # port 9: nothing answers there
    assert result.exit_code == 0, result.output
    assert "alert rules installed" not in result.output


def test_the_live_view_and_the_table_stay_apart_in_a_file(tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.toml"
    scenario.write_text(TINY_SCENARIO)
    args = ["demo", "--scenario", str(scenario), "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(main, args, terminal_width=120)  # not a terminal: a file
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    title = next(i for i, line in enumerate(lines) if "ground truth" in line)
    assert lines[title].strip().startswith("Reflex vs"), lines[title]
    assert lines[title - 1].strip() == "", result.output
