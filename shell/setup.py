"""``reflex setup [--remove] [--dry-run] [--json]``: Reflex in an existing InfluxDB, in one command.

Setting up, with the operator's token (the setup token or an all-access one):

1. applies Reflex's template (:mod:`reflex_localize.dashboards.template`) as the stack
   ``reflex``: buckets, tasks, checks, label, variables. A bucket that already exists is used
   and left out of the stack, so removing never deletes it;
2. stores the webhook URL as an org secret, where the alert tasks read it, and removes what
   would post their events a second time (:func:`~reflex_localize.dashboards.alerts.superseded`);
3. creates the least-privilege tokens (agent, flow, grafana: :mod:`influx.tokens`) into
   ``--tokens-dir`` as ``ROLE.token`` (mode 600); a token file already there whose token
   InfluxDB still takes is kept, so running setup twice makes no second token;
4. with ``--push-url``, sets up the replication stream that pushes telemetry to the flow.

``--remove`` undoes all four: the stream, the tokens setup made (by their description, and
their files in ``--tokens-dir``), the secrets and the stack with everything in it. Running
either twice changes nothing the second time; ``--dry-run`` says what would change and changes
nothing.

>>> from click.testing import CliRunner
>>> "--remove" in CliRunner().invoke(command, ["--help"]).output
True
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from reflex_localize.dashboards.alerts import (
    AlertConfigError,
    AlertSettings,
    delete_secrets,
    org_id_of,
    put_secrets,
    retire,
    superseded,
)
from reflex_localize.dashboards.template import DEFAULT_WEBHOOK_URL, TemplateSettings, build
from reflex_localize.influx.config import InfluxSettings
from reflex_localize.influx.connection import connect
from reflex_localize.influx.flux_literals import Duration
from reflex_localize.influx.stack import (
    Change,
    StackError,
    StackReport,
    apply_stack,
    remove_stack,
)
from reflex_localize.influx.tokens import (
    ROLES,
    TokenError,
    create_token,
    delete_tokens,
    role_description,
)
from reflex_localize.shell.cli_checks import INPUT_FILE, OUTPUT_FOLDER, check_token, influx_refusals
from reflex_localize.shell.influx_options import InfluxOptions, influx_options
from reflex_localize.shell.tokens import write_token_file

if TYPE_CHECKING:
    from influxdb_client import InfluxDBClient

STACK_NAME = "reflex"
STACK_TEXT = "Reflex: installed by reflex setup, removed by reflex setup --remove"
STREAM_NAME = "reflex-flow"
# Every token setup makes is described so; --remove deletes those and no other.
TOKEN_PREFIX = "reflex setup "


@dataclass
class SetupReport:
    """What one run did (or, dry, would do): printed as lines or as one JSON document."""

    stack: StackReport
    tokens: list[dict[str, str]] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    stream: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {**self.stack.as_dict(), "tokens": self.tokens, "secrets": self.secrets,
                "stream": self.stream}  # fmt: skip

    def lines(self) -> list[str]:
        prefix = "(dry run) " if self.stack.dry_run else ""
        out = [f"{prefix}{c.action:9} {c.kind:20} {c.name}" for c in self.stack.changes]
        out += [
            f"{prefix}{t['action']:9} {'Token':20} {t['role']} {t['file']}".rstrip()
            for t in self.tokens
        ]
        out += [f"{prefix}{'removed':9} {'Secret':20} {key}" for key in self.secrets]
        if self.stream is not None:
            out.append(
                f"{prefix}{self.stream['action']:9} {'Replication':20} {self.stream['name']}"
            )
        counts = {a: self.stack.count(a) for a in ("created", "updated", "removed", "kept")}
        out.append(prefix + "stack: " + ", ".join(f"{n} {a}" for a, n in counts.items()))
        return out


@click.command(name="setup")
@influx_options
@click.option("--remove", is_flag=True, help="Remove everything setup made (kept buckets stay).")
@click.option("--dry-run", is_flag=True, help="Say what would change; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option(
    "--webhook-url",
    envvar="REFLEX_ALERT_WEBHOOK_URL",
    default=DEFAULT_WEBHOOK_URL,
    show_default=True,
    help="Where alerts go (default: `reflex alerts relay` on the InfluxDB host).",
)
@click.option("--min-severity", type=click.IntRange(1, 3), default=2, show_default=True)
@click.option("--silence", default="5m", show_default=True, help="Deadman silence (Flux).")
@click.option("--check-every", default="1m", show_default=True, help="Checks' interval (Flux).")
@click.option("--results-bucket", default="reflex", show_default=True)
@click.option("--telemetry-retention-days", type=click.IntRange(min=0), default=30,
              show_default=True, help="0 keeps telemetry forever.")  # fmt: skip
@click.option("--results-retention-days", type=click.IntRange(min=0), default=400,
              show_default=True)  # fmt: skip
@click.option(
    "--tokens-dir",
    type=OUTPUT_FOLDER,
    help="Write agent/flow/grafana tokens here (--remove: delete them).",
)
@click.option("--push-url", help="The flow's push endpoint: set up the replication stream.")
@click.option("--push-token-file", type=INPUT_FILE, help="The token the push endpoint expects.")
def command(
    influx: InfluxOptions,
    remove: bool,
    dry_run: bool,
    as_json: bool,
    webhook_url: str,
    min_severity: int,
    silence: str,
    check_every: str,
    results_bucket: str,
    telemetry_retention_days: int,
    results_retention_days: int,
    tokens_dir: Path | None,
    push_url: str | None,
    push_token_file: Path | None,
) -> None:
    """Install Reflex's buckets, tasks, checks, alerts and tokens in an existing InfluxDB."""
    if push_url and not push_token_file and not remove:
        raise click.UsageError("--push-url needs --push-token-file (the flow's push token)")
    try:  # every option is checked before anything is asked of InfluxDB
        alerts = AlertSettings(
            webhook_url,
            min_severity=min_severity,
            telemetry_bucket=influx.settings().bucket,
            results_bucket=results_bucket,
            silence=Duration(silence),
        )
        template = TemplateSettings(
            alerts,
            telemetry_retention_days=telemetry_retention_days,
            results_retention_days=results_retention_days,
            check_every=Duration(check_every),
        )
    except (AlertConfigError, ValueError) as error:
        raise click.UsageError(str(error)) from None
    operator = influx.require("reflex setup")
    check_token(operator)
    try:
        with influx_refusals(operator.url):
            if remove:
                report = _remove(operator, dry_run, tokens_dir)
            else:
                report = _set_up(operator, template, dry_run, tokens_dir, push_url,
                                 push_token_file)  # fmt: skip
    except (StackError, TokenError) as error:
        raise click.ClickException(_hint(str(error))) from None
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2, default=str))
    else:
        click.echo("\n".join(report.lines()))


def _set_up(
    operator: InfluxSettings,
    template: TemplateSettings,
    dry_run: bool,
    tokens_dir: Path | None,
    push_url: str | None,
    push_token_file: Path | None,
) -> SetupReport:
    resources = build(template)
    stack = apply_stack(operator, STACK_NAME, resources, dry_run=dry_run, description=STACK_TEXT)
    # After the stack: a refused template leaves no secret behind, and what the stack removed
    # itself is not found again.
    with connect(operator) as client:
        org_id = org_id_of(client, operator.org)
        if not dry_run:
            put_secrets(client, org_id, template.alerts)
        stack = _retire_superseded(client, org_id, stack)
    report = SetupReport(stack)
    if tokens_dir is not None:
        report.tokens = _tokens(operator, template.alerts, tokens_dir, dry_run)
    if push_url and push_token_file:
        report.stream = _stream(operator, push_url, push_token_file, dry_run)
    return report


def _retire_superseded(client: InfluxDBClient, org_id: str, stack: StackReport) -> StackReport:
    """Removes (dry: lists) what would post the tasks' events again; the report says so."""
    removed = {(change.kind, change.name) for change in stack.changes if change.action == "removed"}
    found = [item for item in superseded(client, org_id) if (item.kind, item.name) not in removed]
    if not stack.dry_run:
        retire(client, found)
    extra = tuple(Change(item.kind, item.name, "removed") for item in found)
    return dataclasses.replace(stack, changes=stack.changes + extra)


def _tokens(
    operator: InfluxSettings, alerts: AlertSettings, folder: Path, dry_run: bool
) -> list[dict[str, str]]:
    out = []
    for role in sorted(ROLES):
        path = folder / f"{role}.token"
        if path.exists() and _accepted(operator, path):
            out.append({"role": role, "file": str(path), "action": "kept"})
            continue
        if not dry_run:
            buckets = {"telemetry_bucket": alerts.telemetry_bucket,
                       "results_bucket": alerts.results_bucket}  # fmt: skip
            text = role_description(role, **buckets, prefix=TOKEN_PREFIX)
            token = create_token(operator, role, **buckets, description=text)
            folder.mkdir(parents=True, exist_ok=True)
            write_token_file(path, token)
        out.append({"role": role, "file": str(path), "action": "created"})
    return out


def _accepted(operator: InfluxSettings, path: Path) -> bool:
    """Whether InfluxDB still takes the token in ``path`` (a removed setup leaves dead ones)."""
    from influxdb_client.rest import ApiException

    token = dataclasses.replace(operator, token=path.read_text().strip())
    try:
        with connect(token) as client:
            client.buckets_api().find_buckets(limit=1)
    except ApiException as error:
        if error.status != 401:
            raise
        return False
    return True


def _stream(
    operator: InfluxSettings, push_url: str, push_token_file: Path, dry_run: bool
) -> dict[str, Any]:
    # Imported here: the replication module is only needed by sites that push to the flow.
    from reflex_localize.influx.replication import ReplicationError, ensure_stream, stream_status

    if dry_run:
        exists = stream_status(operator, STREAM_NAME) is not None
        return {"name": STREAM_NAME, "action": "unchanged" if exists else "created"}
    try:
        status = ensure_stream(
            operator,
            name=STREAM_NAME,
            local_bucket=operator.bucket,
            remote_url=push_url,
            remote_token=push_token_file.read_text().strip(),
            remote_org=operator.org,
        )
    except ReplicationError as error:
        raise click.ClickException(f"the replication stream: {error}") from None
    action = (
        "created"
        if status.get("created")
        else "updated"
        if status.get("updated")
        else ("unchanged")
    )
    return {**status, "name": STREAM_NAME, "action": action}


def _remove(operator: InfluxSettings, dry_run: bool, tokens_dir: Path | None) -> SetupReport:
    from reflex_localize.influx.replication import ReplicationError, remove_stream, stream_status

    stream = None
    try:
        if stream_status(operator, STREAM_NAME) is not None:
            if not dry_run:
                remove_stream(operator, STREAM_NAME)
            stream = {"name": STREAM_NAME, "action": "removed"}
    except ReplicationError as error:
        raise click.ClickException(f"the replication stream: {error}") from None
    tokens = [{"role": text, "file": "", "action": "removed"}
              for text in delete_tokens(operator, TOKEN_PREFIX, dry_run=dry_run)]  # fmt: skip
    for path in sorted(tokens_dir.glob("*.token")) if tokens_dir else []:
        if path.stem in ROLES:
            if not dry_run:
                path.unlink()
            tokens.append({"role": path.stem, "file": str(path), "action": "removed"})
    with connect(operator) as client:
        secrets = delete_secrets(client, org_id_of(client, operator.org), dry_run=dry_run)
    stack = remove_stack(operator, STACK_NAME, dry_run=dry_run)
    return SetupReport(stack, tokens, secrets, stream)


def _hint(message: str) -> str:
    if "tasks already in the organization" in message:
        return message + " (installed by `reflex alerts install`? run `reflex alerts uninstall`)"
    return message
