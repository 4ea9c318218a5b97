"""`reflex alerts install` is idempotent against the real InfluxDB; `uninstall` removes all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from dashboards_testdata import TestOrg, temporary_org
from influxdb_client.service.secrets_service import SecretsService

from reflex_localize.dashboards.alerts import WEBHOOK_SECRET, AlertSettings, install, rendered_tasks
from reflex_localize.influx.local_server import InfluxServer
from reflex_localize.shell.cli import main

pytestmark = pytest.mark.influx
HOOK = "https://hooks.example.com/services/T0/B0/secret"
TASK_NAMES = {
    "reflex-localization-event",
    "reflex-collector-deadman",
    "reflex-clock-skew",
    "reflex-critical-xid",
    "reflex-downsample-scores",
    "reflex-downsample-baselines",
}


@pytest.fixture
def org(influx: InfluxServer) -> Iterator[TestOrg]:
    with temporary_org(influx) as made:
        yield made


def _tasks(org: TestOrg) -> dict[str, tuple[str, str]]:
    with org.client() as client:
        found = client.tasks_api().find_tasks(org_id=org.id)
    return {task.name: (task.id, task.flux) for task in found}


def _secrets(org: TestOrg) -> list[str]:
    with org.client() as client:
        return list(SecretsService(client.api_client).get_orgs_id_secrets(org.id).secrets or [])


def _buckets(org: TestOrg) -> set[str]:
    with org.client() as client:
        found = client.buckets_api().find_buckets(org_id=org.id).buckets
    return {bucket.name for bucket in found}


def _cli(org: TestOrg, tmp_path: Path, *args: str) -> str:
    token_file = tmp_path / "token"
    token_file.write_text(org.server.token + "\n")
    token_file.chmod(0o600)
    connection = [
        "--influx-url",
        org.server.url,
        "--token-file",
        str(token_file),
        "--org",
        org.name,
    ]
    result = CliRunner().invoke(main, ["alerts", *args, *connection], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_install_twice_creates_nothing_new_and_uninstall_removes_everything(
    org: TestOrg, tmp_path: Path
) -> None:
    first = _cli(org, tmp_path, "install", "--webhook-url", HOOK)
    assert first.count("created") == len(TASK_NAMES)
    installed = _tasks(org)
    assert set(installed) == TASK_NAMES
    assert WEBHOOK_SECRET in _secrets(org)
    assert "reflex_downsampled" in _buckets(org)

    second = _cli(org, tmp_path, "install", "--webhook-url", HOOK)
    assert second.count("unchanged") == len(TASK_NAMES) and "created" not in second
    assert _tasks(org) == installed
    assert sorted(_buckets(org)) == sorted(set(_buckets(org)))

    removed = _cli(org, tmp_path, "uninstall")
    assert removed.count("removed") == len(TASK_NAMES)
    assert _tasks(org) == {}
    assert WEBHOOK_SECRET not in _secrets(org)
    assert "reflex_downsampled" in _buckets(org)  # the long-term data stays
    assert "removed" not in _cli(org, tmp_path, "uninstall")


def test_a_changed_setting_updates_the_tasks_in_place(org: TestOrg) -> None:
    with org.client() as client:
        install(client, org.name, AlertSettings(HOOK))
        before = _tasks(org)
        report = install(client, org.name, AlertSettings(HOOK, min_severity=3))
    after = _tasks(org)
    assert report.updated == ["reflex-localization-event"] and not report.created
    assert before["reflex-localization-event"][0] == after["reflex-localization-event"][0]
    assert "min_severity = 3" in after["reflex-localization-event"][1]


def test_the_webhook_url_stays_out_of_the_task_text(org: TestOrg) -> None:
    with org.client() as client:
        install(client, org.name, AlertSettings(HOOK))
    assert all("hooks.example.com" not in flux for _, flux in _tasks(org).values())
    assert all(
        "hooks.example.com" not in flux for flux in rendered_tasks(AlertSettings(HOOK)).values()
    )


def test_install_into_a_missing_org_fails_cleanly(org: TestOrg, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(org.server.token)
    token_file.chmod(0o600)
    args = ["alerts", "uninstall", "--influx-url", org.server.url, "--token-file", str(token_file)]
    result = CliRunner().invoke(main, [*args, "--org", "no-such-org"])
    assert result.exit_code == 1
    assert "no organization named 'no-such-org'" in result.output


def test_a_bad_token_is_reported_without_a_traceback(org: TestOrg, tmp_path: Path) -> None:
    args = ["alerts", "uninstall", "--influx-url", org.server.url, "--org", org.name]
    result = CliRunner().invoke(main, args, env={"REFLEX_INFLUX_TOKEN": "not-a-token"})
    assert result.exit_code == 1
    assert "InfluxDB answered HTTP 401" in result.output
