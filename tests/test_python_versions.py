"""The training hook installs and runs on Python 3.10-3.13 (training images use them all); the
flow's extras say they need 3.11 or 3.12 (bytewax 0.21's wheels), and the commands say what
they need on a Python that cannot run them.

The hook's modules are checked on every run: standard library imports only, 3.10 syntax. Where
a 3.10 or 3.13 interpreter is installed (pyenv's, or on PATH), the wheel is installed into a
fresh venv of it, offline, and its hook sends records to an agent's TCP listener here.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from reflex_localize.collectors.hook_receiver import HookReceiver
from reflex_localize.shell.install_extras import missing_extra

ROOT = Path(__file__).resolve().parents[1]
_NOT_SOURCE = (".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache",
               "reflex-demo", "*.so")  # fmt: skip


def hook_imports(path: Path) -> set[str]:
    """Modules a hook module imports at module level or in its functions, but for the lazy
    ``influx.config`` of the HTTP sink (REFLEX_HOOK_SINK=influx, an opt-in)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found - {"reflex_localize.influx.config"}


def module_path(name: str) -> Path:
    """Where a ``reflex_localize`` module's source is (its subpackages are the top folders)."""
    parts = name.split(".")[1:]
    base = ROOT.joinpath(*parts) if parts else ROOT / "reflex_localize"
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def hook_modules() -> list[Path]:
    """The training hook's module and every Reflex module it reaches, package inits included."""
    todo, seen = ["reflex_localize.collectors.training_hook"], set()
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for end in range(1, len(parts) + 1):  # the packages on the way are imported too
            prefix = ".".join(parts[:end])
            if prefix not in seen:
                seen.add(prefix)
                todo += [m for m in hook_imports(module_path(prefix))
                         if m.startswith("reflex_localize")]  # fmt: skip
    return sorted({module_path(name) for name in seen})


@pytest.mark.parametrize("path", hook_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_hook_imports_only_the_standard_library_in_310_syntax(path: Path) -> None:
    ast.parse(path.read_text(), feature_version=(3, 10))  # SyntaxError past 3.10's grammar
    for name in hook_imports(path):
        top = name.split(".")[0]
        assert top in sys.stdlib_module_names or top in ("__future__", "reflex_localize"), name


@pytest.mark.slow
def test_the_wheel_says_which_python_each_install_needs(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(name).decode())
    assert metadata["Requires-Python"] == ">=3.10"
    bytewax = [d for d in metadata.get_all("Requires-Dist") or [] if d.startswith("bytewax")]
    assert bytewax and all('python_version >= "3.11"' in d and 'python_version < "3.13"' in d
                           for d in bytewax), bytewax  # fmt: skip


def test_reflex_flow_on_313_says_which_python_it_needs() -> None:
    said = missing_extra("flow", "bytewax", (3, 13))
    assert said.startswith("'reflex flow' needs Python 3.11 or 3.12 (bytewax 0.21 has no wheels")
    assert "pip install" in missing_extra("flow", "bytewax", (3, 11))


def interpreter(version: str) -> str | None:
    for candidate in (
        shutil.which(f"python{version}"),
        *sorted(str(p) for p in Path.home().glob(f".pyenv/versions/{version}.*/bin/python3")),
    ):
        if (
            candidate
            and subprocess.run(
                [candidate, "-c", f"import sys; assert sys.version.startswith('{version}.')"],
                capture_output=True,
            ).returncode
            == 0
        ):
            return candidate
    return None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"  # an in-tree build leaves build/ and *.egg-info in the checkout
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    # Without the compiled decoder (setup.py): a wheel for any Python, as a node's hook takes.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        check=True,
        timeout=600,
        env={**os.environ, "REFLEX_PURE_PYTHON": "1"},
    )
    (built,) = out.glob("reflex_localize-*-py3-none-any.whl")
    return built


@pytest.mark.slow
@pytest.mark.parametrize("version", ["3.10", "3.13"])
def test_the_hook_installs_and_sends_on(version: str, wheel: Path, tmp_path: Path) -> None:
    python = interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} here; the syntax and import checks above still ran")
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin/python"), "-m", "pip", "install", "-q", "--no-index"]
    subprocess.run([*pip, str(wheel)], check=True, timeout=300)  # no dependency to fetch
    receiver = HookReceiver("c1", "n1", path=str(tmp_path / "hook.sock"), address="127.0.0.1:0")
    receiver.start_background(lambda points: None)
    script = (
        "from reflex_localize.collectors.training_hook import TrainingHook\n"
        "hook = TrainingHook(job='j1', rank=0, world_size=1, flush_interval_s=0.05)\n"
        "hook.step(); hook.step(); hook.close()\n"
        "assert not hook.stats.dropped, hook.stats\n"
    )
    env = {"REFLEX_HOOK_ADDRESS": f"127.0.0.1:{receiver.tcp_port}", "PATH": "/usr/bin:/bin"}
    try:
        subprocess.run([str(venv / "bin/python"), "-c", script], env=env, check=True, timeout=60)
        assert receiver.wait_for(4)  # membership on, two steps, membership off
        assert sum(p.measurement == "train_step" for p in receiver.collect(0)) == 2
        assert not receiver.parse_errors
    finally:
        receiver.stop_background()
    said = subprocess.run([str(venv / "bin/reflex"), "collect"], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert said.returncode != 0 and "Traceback" not in said.stderr
    expected = "need Python 3.11 or newer" if version == "3.10" else "training hook alone"
    assert expected in said.stderr, said.stderr


def test_reflex_flow_says_so_at_start_where_bytewax_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As on Python 3.13 with the [flow] install: bytewax left out by its marker. The flow's
    workers import it, so the command must say so before it starts them."""
    from click.testing import CliRunner

    from reflex_localize.shell import cli, install_extras

    monkeypatch.setattr(cli, "installed", lambda module: module != "bytewax")
    monkeypatch.setattr(install_extras, "FLOW_PYTHONS", ())
    runner = CliRunner()
    said = runner.invoke(cli.main, ["flow", "--source", "file:/nonexistent.lp"])
    assert said.exit_code == 1 and "'reflex flow' needs Python 3.11 or 3.12" in said.output
    assert runner.invoke(cli.main, ["--help"]).exit_code == 0  # listing the commands still works
    assert runner.invoke(cli.main, ["remediate", "--help"]).exit_code == 0  # the agent's
