"""``reflex smoke`` end to end: its own InfluxDB, every measurement family, read back."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from reflex_localize.schemas.contract import load_schema
from reflex_localize.shell.cli import main

pytestmark = pytest.mark.influx


def test_reflex_smoke_round_trips_every_measurement():
    result = CliRunner().invoke(main, ["smoke"])
    assert result.exit_code == 0, result.output
    expected = len(load_schema().measurements)
    assert f"OK: {expected} measurements round-tripped" in result.output
