"""Fuzzing configuration and scenario files: 10,000+ malformed TOML documents each.

- ``influx.config``: loading a file (and reading the agent's ``[collect]`` section from it)
  either works or raises :class:`ConfigError` whose message names the file and the key
  (``FILE: [section].key: ...``) or says the file is not valid TOML.
- Scenario files: parsing either gives a Scenario or raises ``ValueError`` (TOML syntax) or
  :class:`ScenarioError` naming the scenario; nothing else escapes.
"""

from __future__ import annotations

import random
import re
import tomllib
from pathlib import Path

import pytest
from fuzz_support import FUZZ, SEEDS, Tally, fuzz_input
from hypothesis import given

from reflex_localize.collectors.settings import CollectSettings
from reflex_localize.influx.config import ConfigError, load_config
from reflex_localize.simulator.scenario import LIBRARY, ScenarioError, parse_scenario

SECTIONS = {
    "influx": [
        "url",
        "org",
        "bucket",
        "token_file",
        "timeout_s",
        "batch_size",
        "verify_ssl",
        "ssl_ca_cert",
        "token",
    ],
    "identity": ["cluster", "node"],
    "collect": [
        "enabled",
        "intervals",
        "proc_root",
        "sys_root",
        "kmsg_path",
        "spool_dir",
        "flush_interval_s",
        "mountpoints",
    ],
}
JUNK_NAMES = ["", "x", "url ", "Influx", "timeout-s", "a.b", "ünï", "enabled"]
VALUES = [
    '"http://127.0.0.1:8086"',
    '"x"',
    '""',
    "1",
    "-3",
    "1.5",
    "nan",
    "inf",
    "true",
    "[1, 2]",
    '["host", "nic"]',
    '["bogus"]',
    "{ a = 1 }",
    "{ host = 2.5 }",
    '{ host = "x" }',
    '"1"',
    '"yes"',
    "1979-05-27",
    "[]",
    "0x10",
    '"\\u0000"',
]
VALID = """\
[influx]
url = "http://127.0.0.1:8086"
org = "reflex"
bucket = "telemetry"
timeout_s = 5.0
batch_size = 1000
verify_ssl = true

[identity]
cluster = "c1"
node = "n1"

[collect]
enabled = ["host", "nic"]
intervals = { host = 1.0, nic = 2 }
spool_dir = "/var/lib/reflex/spool"
"""
# FILE: [section].key: ..., FILE: [section]: ..., or FILE: not valid TOML / cannot read
NAMED = r"^{file}: (\[[^\]]*\](\.[^:]*)?: .+|not valid TOML: .+|cannot read config file: .+)$"
_config = Tally("config files")
_scenario = Tally("scenario files")
SCENARIO_SEEDS = [path.read_text() for path in sorted(LIBRARY.glob("*.toml"))]


def _random_config(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(1, 3)):
        section = rng.choice([*SECTIONS, *JUNK_NAMES])
        lines.append(f'["{section}"]' if rng.random() < 0.1 else f"[{section}]")
        for _ in range(rng.randint(0, 4)):
            key = rng.choice([*SECTIONS.get(section, []), *JUNK_NAMES])
            lines.append(f'"{key}" = {rng.choice(VALUES)}')
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("config") / "reflex.toml"


@FUZZ
@given(SEEDS)
def test_config_errors_name_the_file_and_key(config_file: Path, seed: int) -> None:
    rng = random.Random(seed)
    text = _random_config(rng) if rng.random() < 0.5 else fuzz_input(rng, [VALID])
    config_file.write_text(text, encoding="utf-8", errors="surrogatepass")
    _config.inputs += 1
    try:
        config = load_config(config_file, env={})
        config.section("collect", CollectSettings)
    except ConfigError as error:
        message = str(error)
        assert re.match(NAMED.format(file=re.escape(str(config_file))), message, re.S), message
        assert "Traceback" not in message
        _config.reject(message.split(":")[1].strip() if ": [" in message else "not valid TOML")
        return
    _config.accepted += 1
    assert config.path == config_file


def test_config_tally() -> None:
    _config.check()


@FUZZ
@given(SEEDS)
def test_scenario_files_fail_only_with_named_errors(seed: int) -> None:
    rng = random.Random(seed)
    text = fuzz_input(rng, SCENARIO_SEEDS)
    _scenario.inputs += 1
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        _scenario.reject("not valid TOML")
        return
    try:
        scenario = parse_scenario(raw, default_name="fuzzed")
    except ScenarioError as error:
        assert str(error).startswith("scenario fuzzed: ")
        _scenario.reject(str(error).split(":")[1].strip())
        return
    _scenario.accepted += 1
    assert scenario.nodes == sum(scenario.profiles.values())


def test_scenario_tally() -> None:
    _scenario.check()
