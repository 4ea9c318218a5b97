"""The installed distribution adds one import name, ``reflex_localize``, and carries its data.

Installed next to the unrelated PyPI projects ``reflex`` (a web framework) and ``schemas``,
Reflex must not shadow them or be shadowed: so nothing but ``reflex_localize`` may sit at the
top level of the wheel. (Checked by hand too: the wheel in a fresh venv beside both, with
``reflex --version`` and ``reflex localize``; see docs/installs-and-operations.md.)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_NOT_SOURCE = (".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache",
               "reflex-demo", "*.so")  # fmt: skip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy: an in-tree build leaves build/ and *.egg-info in the checkout.
    source = out / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        check=True,
        timeout=600,
    )
    (built,) = out.glob("reflex_localize-*.whl")
    return zipfile.ZipFile(built)


@pytest.mark.slow
def test_one_top_level_import_name(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"reflex_localize"}
    packages = {name.split("/")[1] for name in wheel.namelist() if name.count("/") > 1}
    assert packages >= {"schemas", "influx", "collectors", "simulator", "flows", "dashboards"}
    assert "shell" in packages


@pytest.mark.slow
def test_the_wheel_carries_its_data_and_entry_point(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    for folder, suffix in (
        ("schemas/", ".csv"),
        ("schemas/hardware/", ".toml"),
        ("simulator/scenarios/", ".toml"),
        ("dashboards/grafana/", ".json"),
        ("dashboards/alerts/", ".flux"),
    ):
        found = [
            n for n in names if n.startswith("reflex_localize/" + folder) and n.endswith(suffix)
        ]
        assert found, f"no {suffix} under {folder} in the wheel"
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "reflex = reflex_localize.shell.console:main" in wheel.read(entry_points).decode()


@pytest.mark.slow
def test_the_plain_install_requires_nothing(wheel: zipfile.ZipFile) -> None:
    """The training hook's install is the wheel alone; every library comes with an extra."""
    (metadata,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    text = wheel.read(metadata).decode()
    requires = [line for line in text.splitlines() if line.startswith("Requires-Dist:")]
    # Each requirement's marker names an extra (some also a Python version: bytewax's).
    markers = [line.partition(";")[2] for line in requires]
    assert requires and all("extra ==" in marker for marker in markers), requires
    extras = {
        line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Provides-Extra")
    }
    assert extras >= {"agent", "flow", "all", "dev"}


@pytest.mark.slow
def test_the_wheel_carries_the_compiled_decoder(wheel: zipfile.ZipFile) -> None:
    """Built where a C compiler is (the project's set-up installs one): the flow's replay reads
    plain lines with it (schemas/plain_lines.c)."""
    compiled = [n for n in wheel.namelist() if n.startswith("reflex_localize/schemas/plain_lines")]
    assert len(compiled) == 1 and compiled[0].endswith(".so"), compiled
