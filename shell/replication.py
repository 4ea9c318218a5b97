"""``reflex replication create|check|status|remove``: the InfluxDB replication stream that
pushes every write to the telemetry bucket on to ``reflex flow --source influx-push``.

All four are idempotent and take the usual InfluxDB options with an operator's token (one
allowed to manage remotes and replications); ``--bucket`` is the replicated bucket. The push
token is the flow's own (``REFLEX_PUSH_TOKEN_FILE`` of the flow), read from ``--push-token-file``
(mode 600), never from a flag. A flow of N processes listens on N ports and takes N streams:
``--name reflex-flow-0 --remote-url http://flow:8087``, ``... -1 ... :8088``.

>>> from click.testing import CliRunner
>>> sorted(command.commands)
['check', 'create', 'remove', 'status']
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from reflex_localize.influx.config import ConfigError, read_token_file
from reflex_localize.influx.replication import (
    ReplicationError,
    ensure_stream,
    remove_stream,
    stream_status,
)
from reflex_localize.shell.cli_checks import check_token
from reflex_localize.shell.influx_options import InfluxOptions, influx_options

NAME = click.option("--name", default="reflex-flow", show_default=True,
                    help="Name of the remote and of the replication.")  # fmt: skip


@click.group(name="replication")
def command() -> None:
    """The replication stream from InfluxDB to the flow's push source."""


@command.command(name="create")
@influx_options
@NAME
@click.option("--remote-url", required=True,
              help="Where the flow listens, e.g. https://flow:8087.")  # fmt: skip
@click.option("--push-token-file", type=click.Path(dir_okay=False, path_type=Path),
              required=True, help="The flow's push token (mode 600).")  # fmt: skip
@click.option("--remote-org", help="Org sent to the flow (ignored by it). [default: --org]")
@click.option("--max-queue-bytes", type=click.IntRange(min=33_554_430),
              help="InfluxDB's queue for the flow's downtime. [default: 64 MiB]")  # fmt: skip
def create(
    influx: InfluxOptions,
    name: str,
    remote_url: str,
    push_token_file: Path,
    remote_org: str | None,
    max_queue_bytes: int | None,
) -> None:
    """Create the stream, or bring it up to date (run it again: nothing changes)."""
    operator = influx.require("reflex replication create")
    check_token(operator)
    try:
        token = read_token_file(push_token_file, "--push-token-file")
        status = ensure_stream(
            operator,
            name=name,
            local_bucket=operator.bucket,
            remote_url=remote_url,
            remote_token=token,
            remote_org=remote_org or operator.org,
            max_queue_bytes=max_queue_bytes,
        )
    except (ReplicationError, ConfigError) as error:
        raise click.ClickException(str(error)) from None
    verb = "created" if status["created"] else "updated" if status["updated"] else "unchanged"
    click.echo(f"{name}: {verb}")
    _show(status)


@command.command(name="status")
@influx_options
@NAME
def status(influx: InfluxOptions, name: str) -> None:
    """Show the stream: where it sends, its queue, and the flow's last answer."""
    _show(_status(influx, name, "reflex replication status"))


@command.command(name="check")
@influx_options
@NAME
def check(influx: InfluxOptions, name: str) -> None:
    """Exit 0 when the stream exists and the flow took its last write (or none was sent yet)."""
    found = _status(influx, name, "reflex replication check")
    code = found["latest_response_code"]
    if code not in (None, 204) or found["latest_error"]:
        _show(found)
        raise click.ClickException(f"{name}: the flow's last answer was {code}")
    click.echo(f"{name}: ok, {found['queue_bytes']} bytes queued")


@command.command(name="remove")
@influx_options
@NAME
def remove(influx: InfluxOptions, name: str) -> None:
    """Delete the stream and its remote (and the queue with them)."""
    operator = influx.require("reflex replication remove")
    try:
        removed = remove_stream(operator, name)
    except ReplicationError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"{name}: {'removed' if removed else 'not there'}")


def _status(influx: InfluxOptions, name: str, what: str) -> dict[str, Any]:
    operator = influx.require(what)
    try:
        found = stream_status(operator, name)
    except ReplicationError as error:
        raise click.ClickException(str(error)) from None
    if found is None:
        raise click.ClickException(f"no replication stream {name!r}")
    return found


def _show(status: dict[str, Any]) -> None:
    code = status["latest_response_code"]
    rows = [
        ("remote", status["remote_url"]),
        ("bucket", status["remote_bucket"]),
        ("queue", f"{status['queue_bytes']:,} of {status['max_queue_bytes']:,} bytes"),
        ("not yet sent", f"{status['remaining_bytes']:,} bytes"),
        ("last answer", "none yet" if code is None else str(code)),
        ("last error", status["latest_error"] or "none"),
    ]
    for label, value in rows:
        click.echo(f"  {label:<13} {value}")
