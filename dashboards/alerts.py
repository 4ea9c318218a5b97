"""Installs and removes Reflex's InfluxDB alert and downsampling tasks, idempotently.

The tasks are the Flux scripts in ``dashboards/alerts/``. Installing renders their parameter
lines (buckets, severity, silence, the critical XIDs of schemas/hardware), stores the webhook
URL as an InfluxDB secret so that it never appears in task text or run logs, creates the
long-retention bucket, and creates or updates each task by name: installing twice creates
nothing new. Uninstalling deletes the tasks and secrets and keeps the downsampled data.

The tasks are the only thing that notifies: installing also removes whatever else would post the
same event again (:func:`superseded`), and says so.

>>> AlertSettings("https://hooks.slack.com/services/T0/B0/x").min_severity
2
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from influxdb_client import BucketRetentionRules, InfluxDBClient
from influxdb_client.domain.task_create_request import TaskCreateRequest
from influxdb_client.domain.task_update_request import TaskUpdateRequest
from influxdb_client.rest import ApiException
from influxdb_client.service.notification_rules_service import NotificationRulesService
from influxdb_client.service.secrets_service import SecretsService

from reflex_localize.influx.flux_literals import Duration, FluxValue, set_params
from reflex_localize.schemas.hardware_profiles import load_profiles

ALERTS_DIR = Path(__file__).parent / "alerts"
WEBHOOK_SECRET = "reflex_alert_webhook_url"
ROUTING_KEY_SECRET = "reflex_pagerduty_routing_key"
PAYLOAD_FORMATS = ("slack", "pagerduty")
DEFAULT_SILENCE = Duration("5m")
DEFAULT_WEBHOOK_TIMEOUT = Duration("10s")
# The rule `reflex setup` once made to post the statuses of Reflex's checks: the severity check
# follows the events and the collector check the deadman task, so each of its posts was a second
# one.
NOTIFYING_RULE = "reflex-notify"
_RULES_PAGE = 100
_TASK_NAME = re.compile(r'^option task = \{name: "([^"]+)"', re.MULTILINE)


class AlertConfigError(ValueError):
    """The settings cannot make working alerts (bad URL, unknown format, missing key)."""


@dataclass(frozen=True)
class AlertSettings:
    webhook_url: str
    min_severity: int = 2
    payload_format: str = "slack"
    pagerduty_routing_key: str | None = None
    telemetry_bucket: str = "telemetry"
    results_bucket: str = "reflex"
    downsampled_bucket: str = "reflex_downsampled"
    downsampled_retention_days: int = 400
    silence: Duration = DEFAULT_SILENCE
    webhook_timeout: Duration = DEFAULT_WEBHOOK_TIMEOUT
    # The agent corrects its stamps past 2 s (collectors/settings.py): alert at the same point.
    clock_skew_threshold_s: float = 2.0

    def __post_init__(self) -> None:
        check_webhook_url(self.webhook_url)
        if self.min_severity not in (1, 2, 3):
            raise AlertConfigError("min_severity is 1 (info), 2 (warning) or 3 (critical)")
        if self.payload_format not in PAYLOAD_FORMATS:
            raise AlertConfigError(f"payload_format is one of {PAYLOAD_FORMATS}")
        if self.payload_format == "pagerduty" and not self.pagerduty_routing_key:
            raise AlertConfigError("the pagerduty format needs a routing key")

    def params(self, script: str) -> dict[str, FluxValue]:
        """The parameter values of one script of ``dashboards/alerts/``, by file stem."""
        common: dict[str, dict[str, FluxValue]] = {
            "localization_event": {
                "results_bucket": self.results_bucket,
                "min_severity": self.min_severity,
                "payload_format": self.payload_format,
                "webhook_timeout": self.webhook_timeout,
            },
            "deadman": {
                "telemetry_bucket": self.telemetry_bucket,
                "silence": self.silence,
                "webhook_timeout": self.webhook_timeout,
            },
            "clock_skew": {
                "telemetry_bucket": self.telemetry_bucket,
                "threshold_seconds": float(self.clock_skew_threshold_s),
                "webhook_timeout": self.webhook_timeout,
            },
            "critical_xid": {
                "telemetry_bucket": self.telemetry_bucket,
                "critical_xids": critical_xids(),
                "webhook_timeout": self.webhook_timeout,
            },
            "downsample_scores": {
                "results_bucket": self.results_bucket,
                "downsampled_bucket": self.downsampled_bucket,
            },
            "downsample_baselines": {
                "results_bucket": self.results_bucket,
                "downsampled_bucket": self.downsampled_bucket,
            },
        }
        return common[script]

    def secrets(self) -> dict[str, str]:
        out = {WEBHOOK_SECRET: self.webhook_url}
        if self.pagerduty_routing_key:
            out[ROUTING_KEY_SECRET] = self.pagerduty_routing_key
        return out


@dataclass(frozen=True)
class Superseded:
    """Something in the org that notifies what the shipped tasks already notify."""

    kind: str  # "Task" or "NotificationRule", as InfluxDB's templates name them
    name: str
    id: str


@dataclass
class InstallReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    superseded: list[Superseded] = field(default_factory=list)  # removed, not shipped


def check_webhook_url(url: str) -> None:
    """Refuses URLs that would leak credentials or cannot be posted to."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise AlertConfigError("the webhook URL must be http(s)://host/...")
    if parts.username or parts.password:
        raise AlertConfigError("put no credentials in the webhook URL's authority")
    if parts.fragment:
        raise AlertConfigError("the webhook URL must not have a #fragment")


def critical_xids() -> list[int]:
    """XID codes that some hardware profile rates critical."""
    codes = {
        code
        for profile in load_profiles().values()
        for code, info in profile.xids.items()
        if info.severity == "critical"
    }
    return sorted(codes)


def scripts() -> dict[str, str]:
    """File stem -> Flux text of every task in ``dashboards/alerts/``."""
    return {path.stem: path.read_text() for path in sorted(ALERTS_DIR.glob("*.flux"))}


def task_name(flux: str) -> str:
    match = _TASK_NAME.search(flux)
    if match is None:
        raise AlertConfigError("a task script needs `option task = {name: ...}` on one line")
    return match[1]


def rendered_tasks(settings: AlertSettings) -> dict[str, str]:
    """Task name -> Flux text as it will be installed."""
    return {
        task_name(text): set_params(text, settings.params(stem)) for stem, text in scripts().items()
    }


def org_id_of(client: InfluxDBClient, org: str) -> str:
    try:
        found = client.organizations_api().find_organizations(org=org)
    except ApiException as error:
        if error.status != 404:
            raise
        found = []
    if not found:
        raise AlertConfigError(f"no organization named {org!r}")
    org_id: str = found[0].id
    return org_id


def _ensure_bucket(client: InfluxDBClient, org_id: str, settings: AlertSettings) -> None:
    buckets = client.buckets_api()
    try:
        found = buckets.find_buckets(name=settings.downsampled_bucket, org_id=org_id).buckets
    except ApiException as error:
        if error.status != 404:  # 2.x answers 404 to a name filter that matches nothing
            raise
        found = []
    if not found:
        rule = BucketRetentionRules(
            type="expire", every_seconds=settings.downsampled_retention_days * 86400
        )
        buckets.create_bucket(
            bucket_name=settings.downsampled_bucket, retention_rules=rule, org=org_id
        )


def install(client: InfluxDBClient, org: str, settings: AlertSettings) -> InstallReport:
    """Creates or updates every task and removes what :func:`superseded` finds; a second
    identical install changes nothing."""
    org_id = org_id_of(client, org)
    put_secrets(client, org_id, settings)
    _ensure_bucket(client, org_id, settings)
    tasks, report = client.tasks_api(), InstallReport()
    for name, flux in rendered_tasks(settings).items():
        existing = tasks.find_tasks(name=name, org_id=org_id)
        if not existing:
            request = TaskCreateRequest(org_id=org_id, flux=flux, status="active")
            tasks.create_task(task_create_request=request)
            report.created.append(name)
            continue
        for duplicate in existing[1:]:
            tasks.delete_task(duplicate.id)
        if existing[0].flux == flux and existing[0].status == "active":
            report.unchanged.append(name)
        else:
            update = TaskUpdateRequest(flux=flux, status="active")
            tasks.update_task_request(existing[0].id, update)
            report.updated.append(name)
    report.superseded = retire(client, superseded(client, org_id))
    return report


def uninstall(client: InfluxDBClient, org: str) -> InstallReport:
    """Deletes Reflex's tasks and secrets; the downsampled bucket and its data stay."""
    org_id = org_id_of(client, org)
    tasks, report = client.tasks_api(), InstallReport()
    for name in (task_name(text) for text in scripts().values()):
        for task in tasks.find_tasks(name=name, org_id=org_id):
            tasks.delete_task(task.id)
            report.removed.append(name)
    report.superseded = retire(client, superseded(client, org_id))
    delete_secrets(client, org_id)
    return report


def superseded(client: InfluxDBClient, org_id: str) -> list[Superseded]:
    """What would post an event a second time: a task that posts to Reflex's webhook secret
    under a name this version does not ship, and the notification rule ``reflex-notify``."""
    shipped = {task_name(text) for text in scripts().values()}
    found = [
        Superseded("Task", task.name, task.id)
        for task in client.tasks_api().find_tasks_iter(org_id=org_id)
        if task.name not in shipped and f'"{WEBHOOK_SECRET}"' in (task.flux or "")
    ]
    rules, offset = NotificationRulesService(client.api_client), 0
    while True:
        page = rules.get_notification_rules(org_id, offset=offset, limit=_RULES_PAGE)
        listed = page.notification_rules or []
        found += [
            Superseded("NotificationRule", rule.name, rule.id)
            for rule in listed
            if rule.name == NOTIFYING_RULE
        ]
        if len(listed) < _RULES_PAGE:
            return found
        offset += _RULES_PAGE


def retire(client: InfluxDBClient, doomed: list[Superseded]) -> list[Superseded]:
    """Deletes what :func:`superseded` found; returns it."""
    for item in doomed:
        if item.kind == "Task":
            client.tasks_api().delete_task(item.id)
        else:
            NotificationRulesService(client.api_client).delete_notification_rules_id(item.id)
    return doomed


def put_secrets(client: InfluxDBClient, org_id: str, settings: AlertSettings) -> None:
    """Stores the webhook URL (and routing key) where the tasks read them: org secrets.

    PATCH adds or replaces these keys only; the org's other secrets stay as they are. (Not the
    template's ``secrets``, nor ``influx apply --secret``: InfluxDB 2.9.1 stores those with
    PutSecrets, which first deletes every secret the org has.)"""
    SecretsService(client.api_client).patch_orgs_id_secrets(org_id, settings.secrets())


def delete_secrets(client: InfluxDBClient, org_id: str, *, dry_run: bool = False) -> list[str]:
    """Deletes the secrets the tasks read; returns the keys that were there."""
    secrets = SecretsService(client.api_client)
    present = set(secrets.get_orgs_id_secrets(org_id).secrets or [])
    doomed = sorted(present & {WEBHOOK_SECRET, ROUTING_KEY_SECRET})
    for key in [] if dry_run else doomed:
        secrets.delete_orgs_id_secrets_id(org_id, key)
    return doomed
