"""The smaller mistakes of issue 40, each a clean line instead of a traceback or a hang:
``--window nan``, ``simulate --scale`` too small for its scenario, ``--out`` under ``/sys``, a
token file that cannot be read as one; and ``reflex influxdb start --data-dir`` leaves the
metadata store (which holds the push token) readable by its owner only."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reflex_localize.influx.config import ConfigError, read_token_file
from reflex_localize.influx.local_server import start_influxdb
from reflex_localize.shell.cli import main
from reflex_localize.shell.cli_checks import pseudo_filesystem


def _refused(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    return result.output.strip().splitlines()[-1]


@pytest.mark.parametrize("value", ["nan", "inf", "NaN", "1e999"])
def test_a_window_that_is_no_number_is_refused(tmp_path: Path, value: str) -> None:
    said = _refused("flow", "--source", "sim:demo", "--sink", "files",
                    "--out", str(tmp_path), "--window", value)  # fmt: skip
    assert said == f"Error: Invalid value for '--window': {value} is not a finite number"


@pytest.mark.parametrize("scale", ["1", "8", "16"])
def test_a_scale_too_small_for_the_scenario_says_so(tmp_path: Path, scale: str) -> None:
    said = _refused("simulate", "fault_xid79", "--scale", scale, "--out", str(tmp_path / "x.lp"))
    assert said.startswith(f"Error: Invalid value for '--scale': {scale} GPUs cannot hold")
    assert "it has 96 GPUs unscaled" in said


@pytest.mark.parametrize("out", ["/sys/x.lp", "/sys/kernel/x.lp", "/proc/x.lp"])
def test_output_into_a_kernel_interface_is_refused(out: str) -> None:
    said = _refused("simulate", "fault_xid79", "--out", out)
    assert "a kernel interface, not a place for output" in said


def test_the_filesystem_of_a_path_is_read_from_the_mount_table(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/sda1 / ext4 rw 0 0\nsysfs /sys sysfs rw 0 0\n"
        "/dev/sdb1 /sys/fs/odd\\040name xfs rw 0 0\n"
    )
    assert pseudo_filesystem(Path("/sys/power/state"), mounts) == "sysfs"
    assert pseudo_filesystem(Path("/sys/fs/odd name/x"), mounts) is None
    assert pseudo_filesystem(Path("/sysadmin/x"), mounts) is None


def _token_file(tmp_path: Path, content: bytes) -> Path:
    path = tmp_path / "token"
    path.write_bytes(content)
    path.chmod(0o600)
    return path


@pytest.mark.parametrize(
    "make, said",
    [
        (lambda d: _token_file(d, b"\x89PNG\r\n\x1a\n\x00\x00"), "does not hold a token"),
        (lambda d: _token_file(d, b"t" * 5000), "does not hold a token"),
        (lambda d: _token_file(d, b"one\ntwo\n"), "does not hold a token"),
        (lambda d: _token_file(d, b"  \n"), "is empty"),
        (lambda d: d, "is not a regular file"),
        (lambda d: d / "missing", "No such file or directory"),
    ],
)
def test_a_token_file_that_is_no_token_is_one_line(
    tmp_path: Path, make: Callable[[Path], Path], said: str
) -> None:
    with pytest.raises(ConfigError, match=said) as refused:
        read_token_file(make(tmp_path))
    assert "\n" not in str(refused.value)


def test_a_fifo_as_token_file_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "token"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(ConfigError, match="is not a regular file"):
        read_token_file(fifo)


def test_an_unreadable_token_file_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _token_file(tmp_path, b"token\n")
    if os.geteuid() != 0:  # root reads any file: refuse the open as the kernel would
        path.chmod(0o000)
    else:
        real_open = Path.open

        def refused_open(self: Path, *args: Any, **kwargs: Any) -> Any:
            if self == path:
                raise PermissionError(13, "Permission denied")
            return real_open(self, *args, **kwargs)

        monkeypatch.setattr(Path, "open", refused_open)
    with pytest.raises(ConfigError, match=r"cannot read token file .*: Permission denied"):
        read_token_file(path)


def test_influxdb_start_keeps_its_metadata_private(tmp_path: Path) -> None:
    data = tmp_path / "influx"
    data.mkdir()
    old = data / "influxd.sqlite"  # a store from before, made 644 by an older influxd
    with start_influxdb(None, data):
        pass
    old.chmod(0o644)
    with start_influxdb(None, data) as server:
        for name in ("influxd.sqlite", "influxd.bolt", "reflex-token"):
            found = [p for p in server.data_dir.iterdir() if p.name.startswith(name)]
            assert found, name
            for path in found:
                assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path
