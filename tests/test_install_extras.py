"""Each install carries what its commands import, and no more: the training hook imports the
standard library only, the agent's commands none of the flow's or eval's libraries, and a
command whose extra is missing says which install it needs (pyproject.toml's extras).

A missing library is simulated by ``sys.modules[name] = None``, which makes its import raise
``ModuleNotFoundError`` exactly as an install without it does. The real installs, in fresh
venvs, are measured by ``benchmarks/install_sizes.py``."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from reflex_localize.shell.install_extras import EXTRA_OF_COMMAND

ROOT = Path(__file__).resolve().parents[1]
FLOW_ONLY = ("bytewax", "rich")
EVAL_ONLY = ("sklearn", "scipy", "matplotlib")
AGENT = ("click", "numpy", "influxdb_client", "pynvml", "prometheus_client")


def reflex(args: list[str], missing: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    """``reflex ARGS`` in a fresh interpreter where the ``missing`` libraries cannot import."""
    code = (
        "import sys\n"
        f"for name in {missing!r}: sys.modules[name] = None\n"
        "from reflex_localize.shell.console import main\n"
        f"sys.argv = ['reflex', *{args!r}]\n"
        "main()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def test_the_hook_imports_the_standard_library_only(tmp_path: Path) -> None:
    # -S: no site-packages at all; the package alone is on the path.
    (tmp_path / "reflex_localize").symlink_to(ROOT / "reflex_localize")
    code = (
        "import sys\n"
        "from reflex_localize.collectors import training_hook\n"
        "outside = sorted({m.split('.')[0] for m in sys.modules}"
        " - set(sys.stdlib_module_names) - {'reflex_localize', '__main__'})\n"
        "print(outside)\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def helps(extra: str, missing: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    """``reflex COMMAND --help`` for every command of ``extra``, in one fresh interpreter where
    the ``missing`` libraries cannot import (the help imports the command's module)."""
    commands = sorted(c for c, e in EXTRA_OF_COMMAND.items() if e == extra)
    code = (
        "import sys\n"
        f"for name in {missing!r}: sys.modules[name] = None\n"
        "from reflex_localize.shell.cli import main\n"
        f"for command in {commands!r}: main([command, '--help'], standalone_mode=False)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def test_agent_commands_need_nothing_from_the_flow_or_eval() -> None:
    result = helps("agent", FLOW_ONLY + EVAL_ONLY)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("Usage: ") == list(EXTRA_OF_COMMAND.values()).count("agent")


def test_flow_commands_need_nothing_from_eval() -> None:
    result = helps("flow", EVAL_ONLY)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("Usage: ") == list(EXTRA_OF_COMMAND.values()).count("flow")


@pytest.mark.parametrize(
    ("command", "missing", "extra"),
    [("flow", FLOW_ONLY, "flow"), ("localize", FLOW_ONLY, "flow"), ("fit", EVAL_ONLY, "all")],
)
def test_a_missing_extra_is_named(command: str, missing: tuple[str, ...], extra: str) -> None:
    result = reflex([command, "--help"], missing)
    assert result.returncode == 1
    assert f"'reflex {command}' needs the '{extra}' install" in result.stderr
    assert f"pip install 'reflex-localize[{extra}]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_hook_install_says_what_the_commands_need() -> None:
    result = reflex(["--help"], ("click",))
    assert result.returncode == 1
    assert "this install is the training hook alone" in result.stderr
    assert "Traceback" not in result.stderr


def test_every_command_names_its_install() -> None:
    from reflex_localize.shell.cli import SUBCOMMANDS

    assert set(SUBCOMMANDS) == set(EXTRA_OF_COMMAND)


def test_the_declared_installs_nest_and_are_not_pinned_exactly() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert project["dependencies"] == []  # the hook's install: nothing
    agent = {r.split(">")[0].split("=")[0].split("<")[0] for r in extras["agent"]}
    assert agent == {"click", "numpy", "influxdb-client", "nvidia-ml-py", "prometheus-client"}
    assert "reflex-localize[agent]" in extras["flow"]
    assert "reflex-localize[flow]" in extras["all"]
    assert "reflex-localize[all]" in extras["dev"]
    every = [r for group in extras.values() for r in group]
    assert not [r for r in every if "==" in r], "exact pins: use tested ranges"
    assert set(EXTRA_OF_COMMAND.values()) <= set(extras)
