"""`reflex replication` against the real InfluxDB: create is idempotent and updates in place,
status shows the queue and the flow's last answer, check fails when the flow refuses the
stream, remove removes once."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from reflex_localize.influx.local_server import InfluxServer, free_port
from reflex_localize.shell.replication import command

pytestmark = pytest.mark.influx


def run(influx: InfluxServer, bucket: str, *args: str) -> tuple[int, str]:
    options = ["--influx-url", influx.url, "--bucket", bucket, "--name", f"cli-{bucket}"]
    result = CliRunner().invoke(
        command, [args[0], *options, *args[1:]], env={"REFLEX_INFLUX_TOKEN": influx.token}
    )
    return result.exit_code, result.output


def test_create_status_check_remove(
    influx: InfluxServer, influx_bucket: str, tmp_path: Path
) -> None:
    token_file = tmp_path / "push-token"
    token_file.write_text("the-flows-push-token\n")
    token_file.chmod(0o600)
    url = f"http://127.0.0.1:{free_port()}"  # nobody listens: the stream cannot deliver
    create = ["create", "--remote-url", url, "--push-token-file", str(token_file)]
    code, output = run(influx, influx_bucket, *create)
    assert code == 0 and ": created" in output and url in output, output
    code, output = run(influx, influx_bucket, *create)
    assert code == 0 and ": unchanged" in output, output
    code, output = run(influx, influx_bucket, *create, "--max-queue-bytes", "40000000")
    assert code == 0 and ": updated" in output and "40,000,000 bytes" in output, output
    code, output = run(influx, influx_bucket, "status")
    assert code == 0 and "last answer   none yet" in output, output
    code, output = run(influx, influx_bucket, "check")
    assert code == 0 and "ok" in output
    token_file.chmod(0o644)
    code, output = run(influx, influx_bucket, *create)
    assert code != 0 and "chmod 600" in output
    assert run(influx, influx_bucket, "remove") == (0, f"cli-{influx_bucket}: removed\n")
    assert run(influx, influx_bucket, "remove") == (0, f"cli-{influx_bucket}: not there\n")
    code, output = run(influx, influx_bucket, "status")
    assert code != 0 and "no replication stream" in output
