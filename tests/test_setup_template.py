"""Reflex's InfluxDB template is built from the alert scripts and the settings, and the checked-in
``influx/template/reflex.json`` is what the builder writes (no InfluxDB needed here)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from click.testing import CliRunner

from reflex_localize.dashboards.alerts import AlertSettings, rendered_tasks
from reflex_localize.dashboards.template import (
    DEFAULT_WEBHOOK_URL,
    LABEL,
    TEMPLATE_FILE,
    TemplateSettings,
    build,
)
from reflex_localize.influx.flux_literals import Duration
from reflex_localize.shell.cli import main

HOOK = "https://hooks.example.com/reflex"


def _by_kind(resources: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for resource in resources:
        out.setdefault(resource["kind"], []).append(resource)
    return out


def test_the_checked_in_template_is_the_default_build() -> None:
    on_disk = json.loads(TEMPLATE_FILE.read_text())
    assert on_disk == build(TemplateSettings(AlertSettings(DEFAULT_WEBHOOK_URL)))


def test_every_resource_kind_is_there_once_per_name_and_labelled() -> None:
    resources = build(TemplateSettings(AlertSettings(HOOK)))
    kinds = Counter(resource["kind"] for resource in resources)
    assert kinds == {
        "Label": 1,
        "Bucket": 3,
        "Variable": 3,
        "CheckThreshold": 2,
        "CheckDeadman": 1,
        "Task": len(rendered_tasks(AlertSettings(HOOK))),
    }
    meta_names = [resource["metadata"]["name"] for resource in resources]
    assert len(meta_names) == len(set(meta_names))
    for resource in resources:
        if resource["kind"] != "Label":
            assert resource["spec"]["associations"] == [{"kind": "Label", "name": LABEL}]


def test_tasks_leave_their_schedule_to_the_template() -> None:
    """InfluxDB writes the ``option task`` line from the spec; a second one would not compile."""
    tasks = _by_kind(build(TemplateSettings(AlertSettings(HOOK))))["Task"]
    for task in tasks:
        assert "option task" not in task["spec"]["query"], task["spec"]["name"]
        assert task["spec"]["every"]
    by_name = {task["spec"]["name"]: task["spec"] for task in tasks}
    assert by_name["reflex-localization-event"]["offset"] == "30s"
    assert by_name["reflex-clock-skew"]["every"] == "5m"


def test_checks_are_tagged_and_no_rule_posts_their_statuses() -> None:
    """The tasks post each event and each silent collector; a rule would post them again."""
    kinds = _by_kind(build(TemplateSettings(AlertSettings(HOOK, min_severity=1))))
    assert "NotificationRule" not in kinds and "NotificationEndpointHTTP" not in kinds
    for kind in ("CheckThreshold", "CheckDeadman"):
        for check in kinds[kind]:
            assert {"key": "source", "value": "reflex"} in check["spec"]["tags"]


def test_buckets_and_checks_follow_the_settings() -> None:
    alerts = AlertSettings(HOOK, telemetry_bucket="tele", results_bucket="out")
    settings = TemplateSettings(
        alerts, telemetry_retention_days=7, results_retention_days=0, check_every=Duration("10s")
    )
    kinds = _by_kind(build(settings))
    rules = {b["spec"]["name"]: b["spec"]["retentionRules"] for b in kinds["Bucket"]}
    assert rules["tele"] == [{"type": "expire", "everySeconds": 7 * 86400}]
    assert rules["out"] == []  # 0 days: kept forever
    for check in kinds["CheckThreshold"]:
        assert check["spec"]["every"] == "10s"
        assert 'from(bucket: "out")' in check["spec"]["query"]
    assert 'from(bucket: "tele")' in kinds["CheckDeadman"][0]["spec"]["query"]


def test_a_negative_retention_is_refused() -> None:
    with pytest.raises(ValueError, match="retention"):
        TemplateSettings(AlertSettings(HOOK), telemetry_retention_days=-1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--check-every", "5x"], "'5x' is not a Flux duration"),
        (["--webhook-url", "https://user:pw@hooks.example.com/"], "no credentials"),
        (["--push-url", "http://flow:8087"], "--push-url needs --push-token-file"),
    ],
)
def test_setup_mistakes_stop_before_influxdb_is_asked(args: list[str], message: str) -> None:
    # The URL is nobody's: were InfluxDB asked first, the error would be "no answer".
    env = {"REFLEX_INFLUX_URL": "http://127.0.0.1:9", "REFLEX_INFLUX_TOKEN": "t"}
    result = CliRunner().invoke(main, ["setup", *args], env=env)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_setup_without_influxdb_says_so_in_one_line() -> None:
    env = {"REFLEX_INFLUX_URL": "http://127.0.0.1:9", "REFLEX_INFLUX_TOKEN": "t"}
    result = CliRunner().invoke(main, ["setup"], env=env)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "127.0.0.1:9" in result.output
