"""Operator handles on the command line: ``--json`` output parses and carries the numbers the
table shows; ``--log-level`` / ``--log-format json`` configure logging once, for child
processes too; progress bars stay off when stderr is not a terminal."""

from __future__ import annotations

import io
import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.shell.cli import main
from reflex_localize.shell.eval import _fmt
from reflex_localize.shell.logging_setup import (
    ENV_FORMAT,
    ENV_LEVEL,
    configure_from_env,
    configure_logging,
    reset_logging,
)
from reflex_localize.shell.progress import ProgressBar
from reflex_localize.simulator import Simulation, load_scenario

BROKEN = ["not line protocol at all", "gpu,cluster=c,node=n1 temperature_celsius=oops 1"]


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    yield
    reset_logging()


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The XID 79 scenario's first 360 s as line protocol, broken lines in two windows."""
    path = tmp_path_factory.mktemp("capture") / "capture.lp"
    sim = Simulation(load_scenario("fault_xid79"), seed=7)
    with path.open("w") as out:
        for number, chunk in enumerate(sim.chunks(10.0)):
            if number * 10 >= 360:
                break
            out.writelines(line + "\n" for frame in chunk for line in encode_frame(frame))
            if number in (3, 4):
                out.writelines(line + "\n" for line in BROKEN)
    return path


def run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.slow
def test_localize_json_has_the_tables_numbers(capture: Path) -> None:
    text = run("localize", "--replay", str(capture))
    document = json.loads(run("localize", "--replay", str(capture), "--json"))
    assert document["events"], "the XID 79 must be localized"
    for event in document["events"]:
        assert f"{event['trigger']} {event['job']}: {event['summary']}" in " ".join(text.split())
    table_rows = re.findall(r"│ (\w+)\s+│ (\w+)\s+│\s+([\d,]+) │", text)
    assert table_rows, text
    assert [(r["where"], r["reason"], r["records"]) for r in document["rejects"]] == [
        (where, reason, int(count.replace(",", ""))) for where, reason, count in table_rows
    ]
    assert document["rejected"] == sum(r["records"] for r in document["rejects"]) >= 4


@pytest.mark.slow
def test_eval_json_has_the_tables_numbers() -> None:
    args = ("eval", "--scenarios", "fault_xid79", "--modes", "reflex")
    text = run(*args)
    (summary,) = json.loads(run(*args, "--json"))
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in text.splitlines() if line.count("│") == 3}  # fmt: skip
    assert rows["hardware faults"] == str(summary["faults"])
    assert rows["top-1 accuracy"] == _fmt(summary["top1"], "%")
    assert rows["event F1"] == f"{summary['f1']:.2f}"
    p50, p95 = summary["ttl_explicit_p50"], summary["ttl_explicit_p95"]
    assert rows["TTL explicit p50 / p95 (s)"] == f"{_fmt(p50)} / {_fmt(p95)}"


def test_json_logs_parse_line_by_line() -> None:
    stream = io.StringIO()
    configure_logging("debug", "json", stream=stream)
    log = logging.getLogger("reflex.test")
    log.debug("a %s", "debug line")
    log.warning('quotes " and\nnewlines stay inside one line')
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("failed")
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [r["level"] for r in records] == ["debug", "warning", "error"]
    assert records[1]["message"] == 'quotes " and\nnewlines stay inside one line'
    assert "RuntimeError: boom" in records[2]["exception"]
    assert records[0]["time"].endswith("Z") and records[0]["logger"] == "reflex.test"


def test_the_level_filters_and_children_inherit_the_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    configure_logging("warning", "text", stream=stream)
    logging.getLogger("reflex.test").info("hidden")
    logging.getLogger("reflex.test").warning("shown")
    assert "hidden" not in stream.getvalue() and "WARNING reflex.test: shown" in stream.getvalue()
    assert (os.environ[ENV_LEVEL], os.environ[ENV_FORMAT]) == ("warning", "text")
    # What a worker of `reflex flow` runs: the parent's choice, and a bad value is not fatal.
    monkeypatch.setenv(ENV_LEVEL, "loud")
    monkeypatch.setenv(ENV_FORMAT, "json")
    configure_from_env()
    assert logging.getLogger().level == logging.INFO
    assert os.environ[ENV_FORMAT] == "json"


def test_the_group_options_reach_every_command() -> None:
    result = CliRunner().invoke(main, ["--log-level", "debug", "simulate", "--list"])
    assert result.exit_code == 0, result.output
    assert logging.getLogger().level == logging.DEBUG
    bad = CliRunner().invoke(main, ["--log-format", "xml", "simulate", "--list"])
    assert bad.exit_code == 2 and "'xml' is not one of 'text', 'json'" in bad.output


def test_no_progress_bar_off_a_terminal() -> None:
    piped, drawn = io.StringIO(), io.StringIO()
    pipe = Console(file=piped, force_terminal=False)
    with ProgressBar(2, "eval", console=pipe) as bar:
        with bar.step("one"):
            pass
        bar.advance()
    assert bar.done == 2 and piped.getvalue() == ""
    terminal = Console(file=drawn, force_terminal=True, width=100)
    with ProgressBar(2, "eval", console=terminal) as bar, bar.step("scenario x"):
        pass
    assert "eval" in drawn.getvalue()
