"""``reflex setup`` against the real InfluxDB: one stack with everything, idempotent, removable.

Each test gets an organization of its own with nothing in it (not even Reflex's buckets), as an
SRE's existing InfluxDB would have, and deletes it after.
"""

from __future__ import annotations

import json
import stat
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS
from influxdb_client.rest import ApiException
from influxdb_client.service.secrets_service import SecretsService

from reflex_localize.dashboards.alerts import WEBHOOK_SECRET
from reflex_localize.dashboards.template import TEMPLATE_FILE
from reflex_localize.influx.config import InfluxSettings
from reflex_localize.influx.local_server import InfluxServer
from reflex_localize.influx.stack import StackError, apply_stack
from reflex_localize.influx.tokens import create_token
from reflex_localize.shell.cli import main

pytestmark = pytest.mark.influx
HOOK = "https://hooks.example.com/services/T0/B0/secret"
ALERT_TASKS = {
    "reflex-localization-event",
    "reflex-collector-deadman",
    "reflex-clock-skew",
    "reflex-critical-xid",
    "reflex-downsample-scores",
    "reflex-downsample-baselines",
}
CHECKS = {"reflex-event-severity", "reflex-node-score", "reflex-collector-silent"}
VARIABLES = {"reflex_telemetry_bucket", "reflex_results_bucket", "reflex_node"}
OWN_BUCKETS = {"telemetry", "reflex", "reflex_downsampled"}
TIMEOUT_MS = 60_000


@pytest.fixture
def org(influx: InfluxServer) -> Iterator[str]:
    name = f"setup-{uuid.uuid4().hex[:10]}"
    with InfluxDBClient(influx.url, influx.token, timeout=TIMEOUT_MS) as client:
        made = client.organizations_api().create_organization(name=name)
    yield name
    if influx.running:
        with InfluxDBClient(influx.url, influx.token, timeout=TIMEOUT_MS) as client:
            client.organizations_api().delete_organization(made.id)


def _client(influx: InfluxServer, org: str, token: str | None = None) -> InfluxDBClient:
    return InfluxDBClient(influx.url, token or influx.token, org=org, timeout=TIMEOUT_MS)


def _setup(influx: InfluxServer, org: str, *args: str, exit_code: int = 0) -> Any:
    env = {"REFLEX_INFLUX_URL": influx.url, "REFLEX_INFLUX_TOKEN": influx.token,
           "REFLEX_INFLUX_ORG": org}  # fmt: skip
    result = CliRunner().invoke(main, ["setup", "--json", *args], env=env)
    assert result.exit_code == exit_code, result.output
    assert influx.token not in result.output
    return json.loads(result.stdout) if exit_code == 0 else result.output


def _actions(report: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(c["kind"], c["name"]): c["action"] for c in report["changes"]}


def _get(client: InfluxDBClient, path: str) -> Any:
    response = client.api_client.call_api(path, "GET", _preload_content=False, auth_settings=[])
    return json.loads(response[0].data)


def _inventory(influx: InfluxServer, org: str) -> dict[str, dict[str, str]]:
    """Name -> id of every bucket, check, rule, endpoint, label, variable and task in ``org``."""
    with _client(influx, org) as client:
        org_id = client.organizations_api().find_organizations(org=org)[0].id
        listed = {
            "buckets": _get(client, f"/api/v2/buckets?orgID={org_id}&limit=100")["buckets"],
            "checks": _get(client, f"/api/v2/checks?orgID={org_id}")["checks"],
            "rules": _get(client, f"/api/v2/notificationRules?orgID={org_id}")["notificationRules"],
            "endpoints": _get(client, f"/api/v2/notificationEndpoints?orgID={org_id}")[
                "notificationEndpoints"
            ],
            "labels": _get(client, f"/api/v2/labels?orgID={org_id}")["labels"],
            "variables": _get(client, f"/api/v2/variables?orgID={org_id}")["variables"],
            "tasks": _get(client, f"/api/v2/tasks?orgID={org_id}&type=basic")["tasks"],
        }
    return {kind: {item["name"]: item["id"] for item in items} for kind, items in listed.items()}


def _permissions(influx: InfluxServer, org: str) -> dict[str, set[tuple[str, str]]]:
    """Token description -> (action, bucket name) of each of its permissions."""
    buckets = {v: k for k, v in _inventory(influx, org)["buckets"].items()}
    with _client(influx, org) as client:
        org_id = client.organizations_api().find_organizations(org=org)[0].id
        found = client.authorizations_api().find_authorizations(org_id=org_id)
    return {
        str(auth.description): {
            (p.action, buckets.get(p.resource.id, f"{p.resource.type}:{p.resource.id}"))
            for p in auth.permissions
        }
        for auth in found
        if (auth.description or "").startswith("reflex")
    }


def _can_write(influx: InfluxServer, org: str, token: str, bucket: str) -> bool:
    with _client(influx, org, token) as client:
        try:
            client.write_api(write_options=SYNCHRONOUS).write(bucket, org, "probe value=1i")
        except ApiException as error:
            assert error.status in (401, 403, 404), error.status
            return False
    return True


def _can_read(influx: InfluxServer, org: str, token: str, bucket: str) -> bool:
    with _client(influx, org, token) as client:
        try:
            client.query_api().query(
                f'from(bucket: "{bucket}") |> range(start: -1h) |> limit(n: 1)'
            )
        except ApiException as error:
            assert error.status in (401, 403, 404), error.status
            return False
    return True


def test_setup_makes_everything_once_and_again_changes_nothing(
    influx: InfluxServer, org: str, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    dry = _setup(influx, org, "--dry-run", "--tokens-dir", str(tokens), "--webhook-url", HOOK)
    assert dry["dry_run"] and set(_actions(dry).values()) == {"created"}
    assert (
        not tokens.exists() and not _inventory(influx, org)["checks"]
    )  # a dry run changes nothing

    first = _setup(influx, org, "--tokens-dir", str(tokens), "--webhook-url", HOOK)
    assert _actions(first) == _actions(dry)  # the dry run said what would happen
    made = _inventory(influx, org)
    assert set(made["buckets"]) >= OWN_BUCKETS
    assert set(made["checks"]) == CHECKS
    assert not made["rules"] and not made["endpoints"]  # the tasks alone notify
    assert set(made["labels"]) == {"reflex"} and set(made["variables"]) == VARIABLES
    assert set(made["tasks"]) == ALERT_TASKS
    with _client(influx, org) as client:
        org_id = client.organizations_api().find_organizations(org=org)[0].id
        assert (
            WEBHOOK_SECRET in SecretsService(client.api_client).get_orgs_id_secrets(org_id).secrets
        )
        telemetry = client.buckets_api().find_buckets(name="telemetry", org_id=org_id).buckets[0]
        assert telemetry.retention_rules[0].every_seconds == 30 * 86400

    files = {path.name: path for path in tokens.iterdir()}
    assert set(files) == {"agent.token", "flow.token", "grafana.token"}
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in files.values())
    assert {t["action"] for t in first["tokens"]} == {"created"}

    second = _setup(influx, org, "--tokens-dir", str(tokens), "--webhook-url", HOOK)
    assert set(_actions(second).values()) == {"unchanged"}, second["changes"]
    assert second["stack_id"] == first["stack_id"]
    assert {t["action"] for t in second["tokens"]} == {"kept"}  # no second set of tokens
    assert _inventory(influx, org) == made  # same resources, same ids

    # A real change is seen as one: only the telemetry bucket's retention differs.
    third = _setup(influx, org, "--webhook-url", HOOK, "--telemetry-retention-days", "7")
    changed = {key: action for key, action in _actions(third).items() if action != "unchanged"}
    assert changed == {("Bucket", "telemetry"): "updated"}


def test_tokens_have_exactly_the_permissions_of_their_role(
    influx: InfluxServer, org: str, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    _setup(influx, org, "--tokens-dir", str(tokens), "--webhook-url", HOOK)
    assert _permissions(influx, org) == {
        "reflex setup agent: write telemetry": {("write", "telemetry")},
        "reflex setup flow: read telemetry, write reflex": {
            ("read", "telemetry"),
            ("write", "reflex"),
        },
        "reflex setup grafana: read telemetry, read reflex": {
            ("read", "telemetry"),
            ("read", "reflex"),
        },
    }
    agent, grafana = (
        (tokens / f"{role}.token").read_text().strip() for role in ("agent", "grafana")
    )
    assert _can_write(influx, org, agent, "telemetry")
    assert not _can_read(influx, org, agent, "telemetry")
    assert _can_read(influx, org, grafana, "reflex") and _can_read(
        influx, org, grafana, "telemetry"
    )
    assert not _can_write(influx, org, grafana, "reflex")


def test_remove_takes_away_what_setup_made_and_nothing_else(
    influx: InfluxServer, org: str, tmp_path: Path
) -> None:
    with _client(influx, org) as client:
        organization = client.organizations_api().find_organizations(org=org)[0]
        org_id = organization.id
        client.buckets_api().create_bucket(bucket_name="telemetry", org=organization)
        client.write_api(write_options=SYNCHRONOUS).write("telemetry", org, "host load1=0.5")
        client.labels_api().create_label(name="site", org_id=org_id)
        client.tasks_api().create_task_every(
            "site-task",
            'from(bucket: "telemetry") |> range(start: -1m) |> count()',
            "1h",
            organization,
        )
        SecretsService(client.api_client).patch_orgs_id_secrets(org_id, {"site_secret": "x"})
    first = _setup(influx, org, "--tokens-dir", str(tmp_path / "tokens"), "--webhook-url", HOOK)
    assert _actions(first)[("Bucket", "telemetry")] == "kept"  # the site's bucket, with its data
    operator = InfluxSettings(url=influx.url, org=org, token=influx.token)
    create_token(operator, "agent")  # `reflex tokens create` works now that the buckets exist

    dry = _setup(influx, org, "--remove", "--dry-run")
    assert {c["action"] for c in dry["changes"]} == {"removed"}
    assert set(_inventory(influx, org)["checks"]) == CHECKS  # the dry run removed nothing

    removed = _setup(influx, org, "--remove")
    assert _actions(removed) == _actions(dry)
    assert ("Bucket", "telemetry") not in _actions(removed)
    left = _inventory(influx, org)
    assert set(left["buckets"]) == {"telemetry", "_monitoring", "_tasks"}
    assert set(left["tasks"]) == {"site-task"} and set(left["labels"]) == {"site"}
    assert not left["checks"] and not left["rules"] and not left["endpoints"]
    assert not left["variables"]
    assert set(_permissions(influx, org)) == {"reflex agent: write telemetry"}
    with _client(influx, org) as client:
        assert SecretsService(client.api_client).get_orgs_id_secrets(org_id).secrets == [
            "site_secret"
        ]
        rows = client.query_api().query('from(bucket: "telemetry") |> range(start: -1h)')
        assert sum(len(table.records) for table in rows) == 1
        assert _get(client, f"/api/v2/stacks?orgID={org_id}")["stacks"] == []
    assert _setup(influx, org, "--remove")["changes"] == []  # nothing left to remove


def test_setup_after_remove_replaces_dead_token_files(
    influx: InfluxServer, org: str, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    _setup(influx, org, "--tokens-dir", str(tokens), "--webhook-url", HOOK)
    dead = (tokens / "agent.token").read_text()
    _setup(influx, org, "--remove")  # the tokens are gone from InfluxDB, their files stay
    again = _setup(influx, org, "--tokens-dir", str(tokens), "--webhook-url", HOOK)
    assert {t["action"] for t in again["tokens"]} == {"created"}
    assert (tokens / "agent.token").read_text() != dead
    assert _can_write(influx, org, (tokens / "agent.token").read_text().strip(), "telemetry")
    removed = _setup(influx, org, "--remove", "--tokens-dir", str(tokens))
    assert {t["file"] for t in removed["tokens"] if t["file"]} == {
        str(tokens / f"{role}.token") for role in ("agent", "flow", "grafana")
    }
    assert not list(tokens.iterdir())


def test_checks_write_statuses_on_their_own_schedule(influx: InfluxServer, org: str) -> None:
    _setup(influx, org, "--webhook-url", HOOK, "--check-every", "2s")
    point = f'reflex_event,cluster=c1,job=j1,trigger=xid severity=3i,event_id="e1" {time.time_ns()}'
    with _client(influx, org) as client:
        client.write_api(write_options=SYNCHRONOUS).write("reflex", org, point)
        statuses: list[dict[str, Any]] = []
        deadline = time.monotonic() + 30
        while not statuses and time.monotonic() < deadline:
            time.sleep(1)
            tables = client.query_api().query(
                'from(bucket: "_monitoring") |> range(start: -5m) '
                '|> filter(fn: (r) => r._measurement == "statuses" and r._field == "_message")'
            )
            statuses = [dict(r.values) for t in tables for r in t.records]
    assert statuses, "no check status reached _monitoring"
    crit = [s for s in statuses if s["_check_name"] == "reflex-event-severity"]
    assert crit and crit[0]["_level"] == "crit" and crit[0]["job"] == "j1"


def test_setup_refuses_tasks_it_did_not_make(influx: InfluxServer, org: str) -> None:
    env = {"REFLEX_INFLUX_URL": influx.url, "REFLEX_INFLUX_TOKEN": influx.token,
           "REFLEX_INFLUX_ORG": org}  # fmt: skip
    installed = CliRunner().invoke(main, ["alerts", "install", "--webhook-url", HOOK], env=env)
    assert installed.exit_code == 0, installed.output
    refused = _setup(influx, org, "--webhook-url", HOOK, exit_code=1)
    assert "reflex alerts uninstall" in refused and "reflex-localization-event" in refused
    with _client(influx, org) as client:
        org_id = client.organizations_api().find_organizations(org=org)[0].id
        assert _get(client, f"/api/v2/stacks?orgID={org_id}")["stacks"] == []  # none left behind


def test_push_url_sets_up_the_stream_and_remove_takes_it_away(
    influx: InfluxServer, org: str, tmp_path: Path
) -> None:
    replication = pytest.importorskip(
        "reflex_localize.influx.replication", reason="influx/replication.py is not written yet"
    )
    push_token = tmp_path / "push.token"
    push_token.write_text("push-secret\n")
    push_token.chmod(0o600)
    args = ("--push-url", "http://127.0.0.1:9/", "--push-token-file", str(push_token))
    first = _setup(influx, org, "--webhook-url", HOOK, *args)
    assert first["stream"]["action"] == "created"
    assert "push-secret" not in json.dumps(first)
    assert _setup(influx, org, "--webhook-url", HOOK, *args)["stream"]["action"] == "unchanged"
    operator = InfluxSettings(url=influx.url, org=org, token=influx.token)
    assert replication.stream_status(operator, "reflex-flow") is not None
    assert _setup(influx, org, "--remove")["stream"]["action"] == "removed"
    assert replication.stream_status(operator, "reflex-flow") is None


def test_the_checked_in_template_is_valid_for_influxdb(influx: InfluxServer, org: str) -> None:
    """What `influx apply -f influx/template/reflex.json` sends: the server's dry run takes it."""
    operator = InfluxSettings(url=influx.url, org=org, token=influx.token)
    report = apply_stack(operator, "reflex", json.loads(TEMPLATE_FILE.read_text()), dry_run=True)
    assert report.count("created") == len(json.loads(TEMPLATE_FILE.read_text()))
    with pytest.raises(StackError, match="no organization 'nope'"):
        apply_stack(InfluxSettings(url=influx.url, org="nope", token=influx.token), "reflex", [])
