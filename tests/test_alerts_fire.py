"""The installed alert tasks, run by hand inside the real InfluxDB, notify a real HTTP
receiver on loopback when they should and stay silent when they should not."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alert_runs import install_into, run_task
from dashboards_testdata import (
    CLUSTER,
    FAULT_NODE,
    SECOND,
    TestOrg,
    events_at,
    telemetry,
    temporary_org,
)
from webhook_receiver import WebhookReceiver

from reflex_localize.dashboards.alerts import AlertSettings
from reflex_localize.influx.flux_literals import Duration
from reflex_localize.influx.local_server import InfluxServer
from reflex_localize.schemas.codec import Point

pytestmark = pytest.mark.influx
EXAMPLES = Path(__file__).resolve().parents[1] / "dashboards" / "alerts" / "examples"


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    return type(value).__name__


def _like_example(payload: dict[str, Any], example: str) -> bool:
    """The payload has the documented example's keys and value types."""
    documented = json.loads((EXAMPLES / f"{example}.json").read_text())
    return _shape(payload) == _shape(documented)


@pytest.fixture
def org(influx: InfluxServer) -> Iterator[TestOrg]:
    with temporary_org(influx) as made:
        yield made


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as running:
        yield running


def _event_alert(org: TestOrg, receiver: WebhookReceiver, **settings: object) -> str:
    tasks = install_into(org, AlertSettings(receiver.url, **settings))  # type: ignore[arg-type]
    status, logs = run_task(org, tasks["reflex-localization-event"])
    assert status == "success", logs
    return status


def test_event_alert_fires_once_for_an_injected_fault(
    org: TestOrg, receiver: WebhookReceiver
) -> None:
    now = time.time_ns()
    org.write("reflex", events_at(now - 10 * SECOND, fault=True))
    org.write("reflex", events_at(now - 5 * SECOND, fault=True))  # the same incident, updated
    _event_alert(org, receiver)
    received = receiver.wait_for(1)
    assert len(received) == 1
    payload = received[0].json()
    assert received[0].method == "POST"
    assert received[0].headers["content-type"] == "application/json"
    assert payload["event_id"] == "evt-0001"
    assert payload["severity"] == 3 and payload["suspect_node"] == FAULT_NODE
    assert payload["cluster"] == CLUSTER
    assert payload["text"].startswith("[Reflex critical] c1/job-1: GPU 1 of n03")
    assert _like_example(payload, "localization_event.slack")


def test_event_alert_stays_silent_for_a_benign_only_data_set(
    org: TestOrg, receiver: WebhookReceiver
) -> None:
    now = time.time_ns()
    org.write("telemetry", telemetry(now, fault=False, minutes=5))
    org.write("reflex", events_at(now - 10 * SECOND, fault=False))
    _event_alert(org, receiver)
    time.sleep(1.0)
    assert receiver.received == []


def test_event_alert_honours_the_severity_threshold(
    org: TestOrg, receiver: WebhookReceiver
) -> None:
    org.write("reflex", events_at(time.time_ns() - 10 * SECOND, fault=False))
    _event_alert(org, receiver, min_severity=1)
    assert len(receiver.wait_for(1)) == 1


def test_event_alert_speaks_pagerduty_events_v2(org: TestOrg, receiver: WebhookReceiver) -> None:
    org.write("reflex", events_at(time.time_ns() - 10 * SECOND, fault=True))
    _event_alert(org, receiver, payload_format="pagerduty", pagerduty_routing_key="R0UT1NG")
    payload = receiver.wait_for(1)[0].json()
    assert payload["routing_key"] == "R0UT1NG"
    assert payload["event_action"] == "trigger" and payload["dedup_key"] == "evt-0001"
    assert payload["payload"]["severity"] == "critical"
    assert payload["payload"]["source"] == FAULT_NODE
    assert _like_example(payload, "localization_event.pagerduty")


def _heartbeat(node: str, time_ns: int) -> Point:
    tags = {"cluster": CLUSTER, "node": node, "collector": "host"}
    return Point("reflex_collector", tags, {"success": True, "duration_seconds": 0.01}, time_ns)


def test_deadman_fires_once_for_a_node_that_stopped_reporting(
    org: TestOrg, receiver: WebhookReceiver
) -> None:
    now = time.time_ns()
    alive = [_heartbeat("n01", now - k * 30 * SECOND) for k in range(20)]
    # n02 reported until 6.5 minutes ago, then went silent.
    silent = [_heartbeat("n02", now - (390 + k * 30) * SECOND) for k in range(10)]
    org.write("telemetry", alive + silent)
    tasks = install_into(org, AlertSettings(receiver.url, silence=Duration("5m")))
    minute_ago = datetime.fromtimestamp(now / 1e9 - 60, UTC)
    status, logs = run_task(org, tasks["reflex-collector-deadman"], scheduled_for=minute_ago)
    assert status == "success", logs
    received = receiver.wait_for(1)
    assert [r.json()["node"] for r in received] == ["n02"]
    assert received[0].json()["kind"] == "deadman"
    assert _like_example(received[0].json(), "deadman")
    # The next scheduled run, a minute later, does not page again for the same silence.
    status, logs = run_task(org, tasks["reflex-collector-deadman"])
    assert status == "success", logs
    time.sleep(0.5)
    assert len(receiver.received) == 1


def test_critical_xid_alert_fires_for_xid_79_and_not_for_xid_13(
    org: TestOrg, receiver: WebhookReceiver
) -> None:
    now = time.time_ns()
    where = {"cluster": CLUSTER, "node": FAULT_NODE, "source": "nvml", "kind": "xid"}
    org.write(
        "telemetry",
        [
            Point("event", where, {"code": 13, "gpu": 0}, now - 20 * SECOND),
            Point("event", where, {"code": 79, "gpu": 1}, now - 10 * SECOND),
        ],
    )
    tasks = install_into(org, AlertSettings(receiver.url))
    status, logs = run_task(org, tasks["reflex-critical-xid"])
    assert status == "success", logs
    received = receiver.wait_for(1)
    time.sleep(0.5)
    assert [r.json()["xid"] for r in receiver.received] == [79]
    assert received[0].json()["node"] == FAULT_NODE
    assert _like_example(received[0].json(), "critical_xid")


def test_a_failing_webhook_fails_the_run_visibly(org: TestOrg) -> None:
    org.write("reflex", events_at(time.time_ns() - 10 * SECOND, fault=True))
    with WebhookReceiver() as refusing:
        refusing.behaviour.status = 503
        tasks = install_into(org, AlertSettings(refusing.url))
        status, logs = run_task(org, tasks["reflex-localization-event"])
    assert status == "failed"
    assert any("webhook answered HTTP 503" in line for line in logs), logs


def _offset(node: str, time_ns: int, offset_s: float) -> Point:
    tags = {"cluster": CLUSTER, "node": node, "collector": "host"}
    return Point("reflex_collector", tags, {"clock_offset_seconds": offset_s}, time_ns)


def test_clock_skew_fires_once_when_a_nodes_clock_drifts_away(
    org: TestOrg, receiver: WebhookReceiver
) -> None:
    now = time.time_ns()
    synced = [_offset("n01", now - k * 30 * SECOND, 0.004) for k in range(20)]
    # n02's clock was fine until 2 minutes ago, then fell 30 s behind (offset +30: the
    # server's clock minus the node's); n03's has been 5 s ahead for an hour, already told.
    drifted = [_offset("n02", now - k * 30 * SECOND, 0.01 if k > 4 else 30.2) for k in range(20)]
    old = [_offset("n03", now - k * 60 * SECOND, -5.0) for k in range(60)]
    org.write("telemetry", synced + drifted + old)
    tasks = install_into(org, AlertSettings(receiver.url))
    status, logs = run_task(org, tasks["reflex-clock-skew"])
    assert status == "success", logs
    received = receiver.wait_for(1)
    time.sleep(0.5)
    assert [r.json()["node"] for r in receiver.received] == ["n02"]
    payload = received[0].json()
    assert payload["kind"] == "clock_skew" and payload["offset_seconds"] == pytest.approx(30.2)
    assert _like_example(payload, "clock_skew")
