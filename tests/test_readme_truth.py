"""The README and ``docs/`` say what the code has: the commands and paths they name exist, the
counts they state are the code's, and they read as a guide, not as a diary (no issue numbers,
no development "stops", no dates)."""

from __future__ import annotations

import functools
import json
import re
import subprocess
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reflex_localize.shell.cli import main
from reflex_localize.shell.simulated_source import simulated_windows
from reflex_localize.simulator import Simulation, load_scenario
from reflex_localize.simulator.scenario import family_names, family_scenarios, scenario_names

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
GUIDES = [README, *DOCS]
MAX_README_LINES = 300
MAX_TABLE_CELL = 100

ISSUE_NUMBER = re.compile(r"\bissues? #?\d+", re.IGNORECASE)
# "stop" as a word; an option or a Flux argument (--stop-ns, stop:) is not the word.
STOP_WORD = re.compile(r"(?<![-\w])stops?\b(?![-:])", re.IGNORECASE)
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
COMMAND = re.compile(r"(?<![\w-])reflex ([a-z][a-z-]*)(?: ([a-z][a-z|-]*))?")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _code(text: str) -> str:
    """The code of a guide: its fenced blocks and its code spans, one a line."""
    blocks = FENCE.findall(text)
    spans = CODE_SPAN.findall(FENCE.sub("", text))
    return "\n".join([*blocks, *spans])


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


@functools.cache
def _top_level_names() -> frozenset[str]:
    """What the repository holds at its top: a guide's path starting with one is a path."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return frozenset(name.split("/")[0] for name in tracked)


def test_the_readme_is_short() -> None:
    lines = _text(README).splitlines()
    assert len(lines) <= MAX_README_LINES, len(lines)


def test_readme_table_cells_are_short() -> None:
    for line in _text(README).splitlines():
        if line.startswith("|"):
            for cell in line.strip("|").split("|"):
                assert len(cell.strip()) <= MAX_TABLE_CELL, cell


@pytest.mark.parametrize("path", GUIDES, ids=_name)
def test_guides_tell_no_history(path: Path) -> None:
    text = _text(path)
    assert not ISSUE_NUMBER.findall(text), ISSUE_NUMBER.findall(text)
    assert not STOP_WORD.findall(text), [
        line for line in text.splitlines() if STOP_WORD.search(line)
    ]
    assert not DATE.findall(text), DATE.findall(text)


def test_the_evaluation_history_is_gone() -> None:
    assert not (ROOT / "docs" / "evaluation-history.md").exists()
    for path in GUIDES:
        assert "evaluation-history" not in _text(path), _name(path)


@pytest.mark.parametrize("path", GUIDES, ids=_name)
def test_every_reflex_command_named_exists(path: Path) -> None:
    context = click.Context(main)
    for name, sub in COMMAND.findall(_code(_text(path))):
        command = main.get_command(context, name)
        assert command is not None, f"{_name(path)} names 'reflex {name}'"
        if sub and isinstance(command, click.Group):
            known = command.list_commands(click.Context(command))
            for word in sub.split("|"):
                assert word in known, f"{_name(path)} names 'reflex {name} {word}'"


def _named_paths(path: Path, top: frozenset[str]) -> list[Path]:
    """Repository paths a guide names: code spans whose first part is a top-level entry of the
    repository, and relative link targets."""
    named = []
    for span in CODE_SPAN.findall(_text(path)):
        candidate = re.split(r"::|: | ", span.strip())[0]
        first = candidate.split("/")[0]
        if first in top and "<" not in candidate and "$" not in candidate:
            named.append(ROOT / candidate)
    for target in LINK.findall(_text(path)):
        if "://" not in target:
            named.append(path.parent / target)
    return named


@pytest.mark.parametrize("path", GUIDES, ids=_name)
def test_every_path_named_exists(path: Path) -> None:
    for named in _named_paths(path, _top_level_names()):
        if any(c in named.name for c in "*?["):
            assert list(named.parent.glob(named.name)), f"{_name(path)}: {named}"
        else:
            assert named.exists(), f"{_name(path)} names {named.relative_to(ROOT)}"


def _stated(pattern: str, text: str) -> tuple[int, ...]:
    found = re.search(pattern, text)
    assert found, pattern
    return tuple(int(group.replace(",", "")) for group in found.groups())


def test_the_counts_the_readme_states_are_the_codes() -> None:
    readme = _text(README)
    assert _stated(r"\| scenario library \| (\d+) scenarios \|", readme) == (len(scenario_names()),)
    families = family_names()
    scenarios = sum(len(family_scenarios(family)) for family in families)
    assert _stated(r"\| (\d+) families, (\d+) scenarios \|", readme) == (
        len(families),
        scenarios,
    )
    evaluation = _text(ROOT / "docs" / "evaluation.md")
    assert _stated(r"(\d+) scenarios, seeds 7, 8 and 9", evaluation) == (scenarios,)


def test_the_demo_the_readme_describes_is_the_demo_scenario() -> None:
    readme = _text(README)
    points, nodes, seconds = _stated(r"\| ([\d,]+) points, (\d+) nodes, (\d+) s \|", readme)
    (injected,) = _stated(r"\| demo: injected faults localized \| \d+ of (\d+) \|", readme)
    sim = Simulation(load_scenario("demo"), seed=7)
    assert (nodes, seconds, injected) == (len(sim.cluster.nodes), sim.duration_s, len(sim.truth))
    made = sum(len(frame) for _, frames in simulated_windows(sim, 10.0) for frame in frames)
    assert points == made


def test_the_demo_table_in_the_readme_is_what_the_demo_prints(tmp_path: Path) -> None:
    readme = _text(README)
    block = readme.split("Reflex vs the simulator's ground truth\n", 1)[1].split("```", 1)[0]
    stated = [re.split(r"\s{2,}", line.strip()) for line in block.splitlines()[1:] if line]
    args = ["demo", "--no-live", "--out", str(tmp_path / "demo")]
    result = CliRunner().invoke(main, args, env={"COLUMNS": "200"})  # rich's width
    assert result.exit_code == 0, result.output
    cells = [[c.strip() for c in line.strip("│").split("│")] for line in result.output.splitlines()]
    printed = [row for row in cells if len(row) == len(stated[0])]
    assert printed == stated, result.output
    localized, _ = _stated(r"\| demo: injected faults localized \| (\d+) of (\d+) \|", readme)
    assert localized == sum(row[-1] == "correct" for row in printed)
    assert "Two benign warnings" in readme
    assert ["events", "event_outside_jobs", "2"] in cells, result.output


def test_the_tours_replay_finds_the_event_the_readme_names() -> None:
    """The tour replays ``fault_xid79`` seed 7 from a file; ``reflex localize`` runs the same
    scenario through the same flow in-process, and event ids are the same either way."""
    readme = _text(README)
    (points,) = _stated(r"--out capture\.lp +# (\d+)k points", readme)
    node, gpu = re.findall(r"# one event: (node-\d+) gpu (\d+)", readme)[0]
    prefix = re.findall(r"reflex report (\w+) --events flow-out/events\.jsonl", readme)[0]
    sim = Simulation(load_scenario("fault_xid79"), seed=7)
    made = sum(len(frame) for _, frames in simulated_windows(sim, 10.0) for frame in frames)
    assert round(made / 1000) == points
    args = ["localize", "--scenario", "fault_xid79", "--seed", "7", "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    events = json.loads(result.output)["events"]
    assert len(events) == 1, events
    top = events[0]["suspects"][0]
    assert (top["node"], top["component"], str(top["index"])) == (node, "gpu", gpu)
    assert events[0]["event_id"].startswith(prefix)
