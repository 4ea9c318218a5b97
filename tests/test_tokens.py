"""Least-privilege tokens (``reflex tokens create``) against the real InfluxDB.

The agent's token writes telemetry and can do nothing else: not read telemetry, not read or
write results. The flow's token reads telemetry and writes results, and cannot write telemetry.
"""

from __future__ import annotations

import contextlib
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ALL_TIME
from influxdb_client import InfluxDBClient
from influxdb_client.rest import ApiException

from reflex_localize.influx.local_server import InfluxServer
from reflex_localize.influx.tokens import TokenError, create_token
from reflex_localize.influx.writer import Writer, WriterError
from reflex_localize.schemas.codec import Point
from reflex_localize.shell.cli import main

pytestmark = pytest.mark.influx
POINT = Point("host", {"cluster": "c1", "node": "n1"}, {"load1": 0.5}, 1_700_000_000 * 10**9)


@pytest.fixture
def results_bucket(influx: InfluxServer) -> Iterator[str]:
    name = f"results-{uuid.uuid4().hex[:12]}"
    influx.create_bucket(name)
    yield name
    influx.delete_bucket(name)


def _cli_token(influx: InfluxServer, role: str, telemetry: str, results: str, out: Path) -> str:
    env = {
        "REFLEX_INFLUX_URL": influx.url,
        "REFLEX_INFLUX_TOKEN": influx.token,
        "REFLEX_INFLUX_BUCKET": telemetry,
    }
    result = CliRunner().invoke(
        main,
        ["tokens", "create", "--role", role, "--results-bucket", results, "--out", str(out)],
        env=env,
    )
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    token = out.read_text().strip()
    assert token and token not in result.output and influx.token not in result.output
    return token


def _can_write(influx: InfluxServer, token: str, bucket: str, spool: Path) -> bool:
    writer = Writer(influx.url, token, influx.org, bucket, spool, timeout_s=5.0)
    try:
        writer.write([POINT])
        return writer.flush(wait_s=5.0) and writer.stats.sent == 1
    except WriterError:  # 401/403, or 404: a bucket the token may not even see
        return False
    finally:
        with contextlib.suppress(WriterError):
            writer.close(wait_s=0)


def _can_read(influx: InfluxServer, token: str, bucket: str) -> bool:
    with InfluxDBClient(influx.url, token, org=influx.org, timeout=5000) as client:
        try:
            client.query_api().query(f'from(bucket: "{bucket}") |> {ALL_TIME} |> limit(n: 1)')
        except ApiException as error:
            assert error.status in (401, 403, 404), error.status
            return False
    return True


def test_agent_token_only_writes_telemetry(
    influx: InfluxServer, influx_bucket: str, results_bucket: str, tmp_path: Path
) -> None:
    token = _cli_token(influx, "agent", influx_bucket, results_bucket, tmp_path / "agent.token")
    assert _can_write(influx, token, influx_bucket, tmp_path / "s1")
    assert not _can_read(influx, token, influx_bucket)
    assert not _can_write(influx, token, results_bucket, tmp_path / "s2")
    assert not _can_read(influx, token, results_bucket)


def test_flow_token_reads_telemetry_and_writes_results_only(
    influx: InfluxServer, influx_bucket: str, results_bucket: str, tmp_path: Path
) -> None:
    token = _cli_token(influx, "flow", influx_bucket, results_bucket, tmp_path / "flow.token")
    assert _can_read(influx, token, influx_bucket)
    assert _can_write(influx, token, results_bucket, tmp_path / "s1")
    assert not _can_write(influx, token, influx_bucket, tmp_path / "s2")


def test_unknown_bucket_and_bad_admin_token_are_clear_errors(
    influx: InfluxServer, influx_bucket: str
) -> None:
    with pytest.raises(TokenError, match="no bucket 'nope'"):
        create_token(
            influx.settings(), "flow", telemetry_bucket=influx_bucket, results_bucket="nope"
        )
    bad = "not-the-token-" + uuid.uuid4().hex
    with pytest.raises(TokenError, match="HTTP 401") as raised:
        create_token(influx.settings(token=bad), "agent", telemetry_bucket=influx_bucket)
    assert bad not in str(raised.value)
