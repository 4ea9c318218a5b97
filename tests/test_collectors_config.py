"""influx.config: file plus environment, errors that name key and file, tokens kept secret."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pytest

from reflex_localize.collectors.settings import CollectSettings
from reflex_localize.influx.config import ConfigError, load_config, read_token_file


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "reflex.toml"
    path.write_text(text)
    return path


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = write(
        tmp_path, '[influx]\nurl = "http://file:8086"\nbucket = "b"\n[identity]\nnode = "f"'
    )
    config = load_config(path, env={"REFLEX_INFLUX_URL": "http://env:8086", "REFLEX_NODE": "e"})
    assert config.influx.url == "http://env:8086" and config.influx.bucket == "b"
    assert config.identity.node == "e"


def test_node_defaults_to_the_hostname() -> None:
    assert load_config(None, env={}).identity.node


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[collect]\nintervalz = {}\n")
    with pytest.raises(ConfigError, match=r"reflex\.toml: \[collect\]\.intervalz: unknown key"):
        load_config(path, env={}).section("collect", CollectSettings)


def test_wrong_type_names_key_and_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[collect]\nintervals = {host = "fast"}\n')
    with pytest.raises(ConfigError, match=r"\[collect\]\.intervals\.host: expected float"):
        load_config(path, env={}).section("collect", CollectSettings)


def test_bad_toml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[collect\n")
    with pytest.raises(ConfigError, match=r"reflex\.toml: not valid TOML"):
        load_config(path, env={})


def test_sections_for_other_components(tmp_path: Path) -> None:
    @dataclass(frozen=True)
    class FlowSettings:
        workers: int = 1
        shards: tuple[str, ...] = ()

    path = write(tmp_path, '[flow]\nworkers = 4\nshards = ["a", "b"]\n')
    assert load_config(path, env={}).section("flow", FlowSettings) == FlowSettings(4, ("a", "b"))
    assert load_config(None, env={}).section("flow", FlowSettings) == FlowSettings()


def test_token_from_environment_never_shows(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    config = load_config(None, env={"REFLEX_INFLUX_TOKEN": "t0ps3cret"})
    assert config.influx.token == "t0ps3cret"
    assert "t0ps3cret" not in repr(config) and "t0ps3cret" not in str(config.influx)
    assert "t0ps3cret" not in caplog.text


def test_token_in_the_config_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[influx]\ntoken = "t0ps3cret"\n')
    with pytest.raises(ConfigError, match="token_file") as error:
        load_config(path, env={})
    assert "t0ps3cret" not in str(error.value)


def test_token_file_must_be_private(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t0ps3cret\n")
    token.chmod(0o644)
    with pytest.raises(ConfigError, match="readable by group or others") as error:
        load_config(None, env={"REFLEX_INFLUX_TOKEN_FILE": str(token)})
    assert "REFLEX_INFLUX_TOKEN_FILE" in str(error.value) and "t0ps3cret" not in str(error.value)
    token.chmod(0o600)
    assert read_token_file(token) == "t0ps3cret"
    path = write(tmp_path, f'[influx]\ntoken_file = "{token}"\n')
    assert load_config(path, env={}).influx.token == "t0ps3cret"


def test_missing_token_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read token file"):
        load_config(None, env={"REFLEX_INFLUX_TOKEN_FILE": str(tmp_path / "nope")})


def test_the_example_deploy_config_loads() -> None:
    example = Path(__file__).parents[1] / "deploy" / "collect.toml"
    config = load_config(example, env={"REFLEX_INFLUX_TOKEN": "t"})  # env token wins the file
    settings = config.section("collect", CollectSettings)
    assert config.identity.cluster == "train-a" and settings.interval("host_fs", 1.0) == 30.0
