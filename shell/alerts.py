"""``reflex alerts install|uninstall``: Reflex's InfluxDB tasks, through the API."""

from __future__ import annotations

import dataclasses
import threading

import click
from influxdb_client import InfluxDBClient

from reflex_localize.dashboards.alerts import (
    PAYLOAD_FORMATS,
    AlertConfigError,
    AlertSettings,
    InstallReport,
    install,
    uninstall,
)
from reflex_localize.dashboards.webhook_relay import WebhookRelay
from reflex_localize.influx.config import InfluxSettings
from reflex_localize.influx.connection import connect
from reflex_localize.influx.flux_literals import Duration
from reflex_localize.shell.cli_checks import POSITIVE_SECONDS, HostPort, influx_refusals
from reflex_localize.shell.influx_options import InfluxOptions, influx_options

# Installing a task compiles its Flux on the server, which takes seconds on a busy one.
HTTP_TIMEOUT_S = 30.0


def _client(settings: InfluxSettings) -> InfluxDBClient:
    return connect(dataclasses.replace(settings, timeout_s=max(settings.timeout_s, HTTP_TIMEOUT_S)))


def _print(report: InstallReport) -> None:
    for verb in ("created", "updated", "unchanged", "removed"):
        for name in getattr(report, verb):
            click.echo(f"{verb:9} {name}")
    for item in report.superseded:
        click.echo(f"{'removed':9} {item.kind} {item.name} (it posted what the tasks post)")


@click.group()
def command() -> None:
    """InfluxDB alert and downsampling tasks (dashboards/alerts/*.flux)."""


@command.command("install")
@influx_options
@click.option("--webhook-url", envvar="REFLEX_ALERT_WEBHOOK_URL", required=True)
@click.option("--min-severity", type=click.IntRange(1, 3), default=2, show_default=True)
@click.option("--format", "payload_format", type=click.Choice(PAYLOAD_FORMATS), default="slack")
@click.option("--pagerduty-routing-key", envvar="REFLEX_PAGERDUTY_ROUTING_KEY")
@click.option("--silence", default="5m", show_default=True, help="Deadman silence (Flux).")
@click.option(
    "--clock-skew-threshold",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    help="Seconds a node's clock may be off from InfluxDB's before it is notified.",
)
@click.option("--results-bucket", default="reflex", show_default=True)
@click.option("--downsampled-bucket", default="reflex_downsampled", show_default=True)
def install_command(
    influx: InfluxOptions,
    webhook_url: str,
    min_severity: int,
    payload_format: str,
    pagerduty_routing_key: str | None,
    silence: str,
    clock_skew_threshold: float,
    results_bucket: str,
    downsampled_bucket: str,
) -> None:
    """Creates or updates the tasks; running it twice creates nothing new."""
    # No --token option: a command line shows up in `ps` and in shell history.
    influx_settings = influx.require("reflex alerts")
    try:
        settings = AlertSettings(
            webhook_url,
            min_severity=min_severity,
            payload_format=payload_format,
            pagerduty_routing_key=pagerduty_routing_key,
            telemetry_bucket=influx_settings.bucket,
            results_bucket=results_bucket,
            downsampled_bucket=downsampled_bucket,
            silence=Duration(silence),
            clock_skew_threshold_s=clock_skew_threshold,
        )
        with influx_refusals(influx_settings.url), _client(influx_settings) as client:
            _print(install(client, influx_settings.org, settings))
    except (AlertConfigError, ValueError) as error:
        raise click.ClickException(str(error)) from None


@command.command("uninstall")
@influx_options
def uninstall_command(influx: InfluxOptions) -> None:
    """Deletes the tasks and the webhook secrets (downsampled data stays)."""
    settings = influx.require("reflex alerts")
    try:
        with influx_refusals(settings.url), _client(settings) as client:
            _print(uninstall(client, settings.org))
    except AlertConfigError as error:
        raise click.ClickException(str(error)) from None


@command.command("relay")
@click.option("--listen", type=HostPort(), default="127.0.0.1:9099", show_default=True,
              help="HOST:PORT.")  # fmt: skip
@click.option(
    "--forward-url",
    envvar="REFLEX_ALERT_FORWARD_URL",
    required=True,
    help="The real endpoint (Slack/PagerDuty URLs are secrets: prefer the env var).",
)
@click.option("--timeout", "timeout_s", type=POSITIVE_SECONDS, default=10.0, show_default=True)
def relay_command(listen: tuple[str, int], forward_url: str, timeout_s: float) -> None:
    """Forwards the tasks' webhook posts with a timeout and no redirects to other hosts.

    Install the alerts with --webhook-url http://LISTEN/ to put it in the path."""
    host, port = listen
    try:
        relay = WebhookRelay(forward_url, host, port, timeout_s)
    except (ValueError, OSError) as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"relaying alert webhooks on {relay.url}")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        relay.close()
