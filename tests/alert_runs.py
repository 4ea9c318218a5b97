"""Installs Reflex's alert tasks in a test organization and runs them by hand."""

from __future__ import annotations

import time
from datetime import datetime

from dashboards_testdata import TestOrg
from influxdb_client import InfluxDBClient
from influxdb_client.rest import ApiException

from reflex_localize.dashboards.alerts import AlertSettings, install

RUN_TIMEOUT_S = 60.0


def install_into(org: TestOrg, settings: AlertSettings) -> dict[str, str]:
    """Installs the tasks; returns task name -> id."""
    with org.client() as client:
        install(client, org.name, settings)
        tasks = client.tasks_api().find_tasks(org_id=org.id)
    return {task.name: task.id for task in tasks}


def run_task(
    org: TestOrg, task_id: str, scheduled_for: datetime | None = None
) -> tuple[str, list[str]]:
    """POST /api/v2/tasks/{id}/runs, then waits; returns the final status and the run log.

    ``scheduled_for`` is the run's ``now()``, as for a scheduled run (default: now).
    """
    with org.client() as client:
        tasks = client.tasks_api()
        run = tasks.run_manually(task_id, scheduled_for=scheduled_for)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                run = tasks.get_run(task_id, run.id)
            except ApiException as error:
                if error.status != 404:  # between queued and started, a run is not found
                    raise
            if run.status in ("success", "failed", "canceled"):
                break
            time.sleep(0.1)
        logs = _logs(client, task_id, run.id)
    return str(run.status), logs


def _logs(client: InfluxDBClient, task_id: str, run_id: str) -> list[str]:
    """The run's log; a just-finished run's log can take a moment to be found."""
    deadline = time.monotonic() + 10.0
    while True:
        try:
            return [entry.message for entry in client.tasks_api().get_run_logs(task_id, run_id)]
        except ApiException as error:
            if error.status != 404 or time.monotonic() > deadline:
                raise
        time.sleep(0.1)
