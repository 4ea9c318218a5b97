"""``reflex tokens create --role agent|flow``: a least-privilege token through the InfluxDB API.

The operator's token comes from the usual place (``REFLEX_INFLUX_TOKEN`` or a token file with
safe permissions, see :mod:`influx.config`). The new token goes to ``--out FILE`` (created with
mode 600) or, without ``--out``, to standard output, and nowhere else: never into a log.

>>> from click.testing import CliRunner
>>> "--role" in CliRunner().invoke(command, ["create", "--help"]).output
True
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from reflex_localize.influx.tokens import ROLES, TokenError, create_token
from reflex_localize.shell.cli_checks import OUTPUT_FILE, check_token, influx_refusals
from reflex_localize.shell.influx_options import InfluxOptions, influx_options


@click.group(name="tokens")
def command() -> None:
    """Least-privilege InfluxDB tokens for the agent and the flow."""


@command.command(name="create")
@click.option(
    "--role",
    type=click.Choice(sorted(ROLES)),
    required=True,
    help="agent: write telemetry only; flow: read telemetry, write results; "
    "grafana: read telemetry and results.",
)
@influx_options
@click.option(
    "--results-bucket", default="reflex", show_default=True, help="Bucket of the flow's results."
)
@click.option(
    "--out",
    type=OUTPUT_FILE,
    help="Write the token to this file (mode 600) instead of standard output.",
)
def create(influx: InfluxOptions, role: str, results_bucket: str, out: Path | None) -> None:
    """Create a token with only what ROLE needs (the operator's token makes it)."""
    operator = influx.require("reflex tokens create")
    check_token(operator)
    try:
        with influx_refusals(operator.url):
            token = create_token(
                operator, role, telemetry_bucket=operator.bucket, results_bucket=results_bucket
            )
    except TokenError as error:
        raise click.ClickException(str(error)) from None
    if out is None:
        click.echo(token)
        return
    write_token_file(out, token)
    click.echo(f"{role} token written to {out} (mode 600)", err=True)


def write_token_file(path: Path, token: str) -> None:
    """Writes ``token`` to ``path`` readable by its owner only, whether or not it existed."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    # O_CREAT's mode does not apply to a file that already existed: narrow it before writing.
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token + "\n")
