"""One localization event gives one webhook post, whichever way Reflex's alerting was installed.

Each case starts from an organization as an earlier version left it: `reflex setup` of 0.1.0
(``fixtures/influx-template-0.1.0.json``: tasks, checks, and a notification rule that also
posted the checks' statuses), plus a Reflex task under a name this version no longer ships.
Then the current installer runs, an event is written, and every task, check and rule in the
organization runs once, by hand, in the real InfluxDB; a real HTTP receiver counts the posts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from alert_runs import run_task
from click.testing import CliRunner
from dashboards_testdata import SECOND, TestOrg, events_at, temporary_org
from influxdb_client import InfluxDBClient
from influxdb_client.domain.task_create_request import TaskCreateRequest
from webhook_receiver import WebhookReceiver

from reflex_localize.dashboards.alerts import AlertSettings, rendered_tasks
from reflex_localize.influx.config import InfluxSettings
from reflex_localize.influx.local_server import InfluxServer
from reflex_localize.influx.stack import apply_stack
from reflex_localize.shell.cli import main

pytestmark = pytest.mark.influx
EARLIER_TEMPLATE = Path(__file__).parent / "fixtures" / "influx-template-0.1.0.json"
EARLIER_NAME = "reflex-event-notify"  # a localization-event task under another name


@pytest.fixture
def org(influx: InfluxServer) -> Iterator[TestOrg]:
    with temporary_org(influx) as made:
        yield made


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as running:
        yield running


def _get(client: InfluxDBClient, path: str) -> Any:
    response = client.api_client.call_api(path, "GET", _preload_content=False, auth_settings=[])
    return json.loads(response[0].data)


def _earlier_install(org: TestOrg, url: str) -> None:
    """The 0.1.0 stack posting to ``url``, and a Reflex task with a name no longer shipped."""
    resources = json.loads(EARLIER_TEMPLATE.read_text())
    for resource in resources:
        if resource["kind"] == "NotificationEndpointHTTP":
            resource["spec"]["url"] = url
    apply_stack(InfluxSettings(url=org.server.url, org=org.name, token=org.server.token),
                "reflex", resources)  # fmt: skip
    flux = rendered_tasks(AlertSettings(url))["reflex-localization-event"]
    flux = flux.replace('name: "reflex-localization-event"', f'name: "{EARLIER_NAME}"')
    with org.client() as client:
        request = TaskCreateRequest(org_id=org.id, flux=flux, status="active")
        client.tasks_api().create_task(task_create_request=request)


def _cli(org: TestOrg, *args: str) -> str:
    env = {"REFLEX_INFLUX_URL": org.server.url, "REFLEX_INFLUX_TOKEN": org.server.token,
           "REFLEX_INFLUX_ORG": org.name}  # fmt: skip
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _run_everything(org: TestOrg) -> list[str]:
    """Runs every check, then every rule, then every task once; returns what ran.

    Each group runs at once (a manual run takes about a second to be picked up); the rules run
    after the checks, to send the statuses the checks have just written."""
    with org.client() as client:
        checks = _get(client, f"/api/v2/checks?orgID={org.id}")["checks"]
        rules = _get(client, f"/api/v2/notificationRules?orgID={org.id}")["notificationRules"]
        tasks = _get(client, f"/api/v2/tasks?orgID={org.id}&type=basic")["tasks"]
    ran = []
    with ThreadPoolExecutor(max_workers=8) as pool:
        for group in (checks, rules, tasks):
            ids = [item.get("taskID") or item["id"] for item in group]
            results = pool.map(lambda task_id: run_task(org, task_id), ids)
            for item, (status, logs) in zip(group, results, strict=True):
                assert status == "success", (item["name"], logs)
                ran.append(item["name"])
    return ran


def _posts_for_one_event(org: TestOrg, receiver: WebhookReceiver) -> list[dict[str, Any]]:
    org.write("reflex", events_at(time.time_ns() - 10 * SECOND, fault=True))
    ran = _run_everything(org)
    assert "reflex-localization-event" in ran
    statuses = org.query(
        'from(bucket: "_monitoring") |> range(start: -5m) |> filter(fn: (r) => '
        'r._measurement == "statuses" and r._check_name == "reflex-event-severity")'
    )
    levels = {record["_level"] for table in statuses for record in table.records}
    assert levels == {"crit"}  # the check saw the event: it shows in the UI, and posts nothing
    time.sleep(0.5)  # a post is made inside its run; this is only for a straggling handler
    return [post.json() for post in receiver.received]


def test_alerts_install_over_an_earlier_setup_notifies_once(
    org: TestOrg, receiver: WebhookReceiver
) -> None:
    _earlier_install(org, receiver.url)
    first = _cli(org, "alerts", "install", "--webhook-url", receiver.url)
    assert "removed   NotificationRule reflex-notify" in first
    assert f"removed   Task {EARLIER_NAME}" in first
    second = _cli(org, "alerts", "install", "--webhook-url", receiver.url)
    assert "removed" not in second and "created" not in second
    posts = _posts_for_one_event(org, receiver)
    assert len(posts) == 1, posts
    assert posts[0]["kind"] == "localization_event" and posts[0]["event_id"] == "evt-0001"


def test_setup_over_an_earlier_setup_notifies_once(org: TestOrg, receiver: WebhookReceiver) -> None:
    _earlier_install(org, receiver.url)
    report = json.loads(_cli(org, "setup", "--json", "--webhook-url", receiver.url))
    removed = {(c["kind"], c["name"]) for c in report["changes"] if c["action"] == "removed"}
    assert ("NotificationRule", "reflex-notify") in removed
    assert ("Task", EARLIER_NAME) in removed
    posts = _posts_for_one_event(org, receiver)
    assert len(posts) == 1, posts
    assert posts[0]["kind"] == "localization_event" and posts[0]["event_id"] == "evt-0001"
