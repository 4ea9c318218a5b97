"""How the alert tasks' webhook behaves against hostile or broken endpoints, inside the real
InfluxDB: a hanging endpoint times out; a redirect to another host is followed by InfluxDB's
HTTP client, which Flux cannot switch off (see the xfail below and dashboards/README.md)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from alert_runs import install_into, run_task
from dashboards_testdata import SECOND, TestOrg, events_at, temporary_org
from webhook_receiver import Behaviour, WebhookReceiver

from reflex_localize.dashboards.alerts import AlertSettings
from reflex_localize.dashboards.webhook_relay import WebhookRelay
from reflex_localize.influx.flux_literals import Duration
from reflex_localize.influx.local_server import InfluxServer

pytestmark = pytest.mark.influx


@pytest.fixture
def org(influx: InfluxServer) -> Iterator[TestOrg]:
    with temporary_org(influx) as made:
        made.write("reflex", events_at(time.time_ns() - 10 * SECOND, fault=True))
        yield made


def test_a_hanging_endpoint_times_out_and_fails_the_run(org: TestOrg) -> None:
    with WebhookReceiver(behaviour=Behaviour(delay_s=8.0)) as hanging:
        settings = AlertSettings(hanging.url, webhook_timeout=Duration("1s"))
        tasks = install_into(org, settings)
        started = time.monotonic()
        status, logs = run_task(org, tasks["reflex-localization-event"])
        elapsed = time.monotonic() - started
    assert status == "failed"
    assert elapsed < 6.0, "the run waited for the endpoint instead of timing out"
    assert any("Timeout" in line or "deadline" in line for line in logs), logs


def _redirected(org: TestOrg, status: int) -> list[bytes]:
    """Bodies that reached another host after the endpoint answered with a redirect."""
    with WebhookReceiver(host="127.0.0.2") as elsewhere:
        redirect = Behaviour(status=status, location=elsewhere.url)
        with WebhookReceiver(behaviour=redirect) as endpoint:
            tasks = install_into(org, AlertSettings(endpoint.url))
            run_task(org, tasks["reflex-localization-event"])
            assert len(endpoint.wait_for(1)) == 1
            time.sleep(0.5)
        return [received.body for received in elsewhere.received]


@pytest.mark.parametrize("status", [301, 302, 303])
def test_a_see_other_redirect_to_another_host_carries_no_payload(org: TestOrg, status: int) -> None:
    assert all(body == b"" for body in _redirected(org, status))


@pytest.mark.xfail(
    strict=True,
    reason="Flux's HTTP client (flux v0.200.0, Go net/http defaults) follows a 307/308 to any "
    "host and re-sends the body; Flux has no option to refuse redirects",
)
def test_a_temporary_redirect_to_another_host_carries_no_payload(org: TestOrg) -> None:
    assert all(body == b"" for body in _redirected(org, 307))


def test_through_the_relay_a_redirect_to_another_host_carries_nothing(org: TestOrg) -> None:
    """The fix for the xfail above: the tasks post to `reflex alerts relay`, which follows
    redirects only on the endpoint's own host, and fails the run instead."""
    with WebhookReceiver(host="127.0.0.2") as elsewhere:
        redirect = Behaviour(status=307, location=elsewhere.url)
        with WebhookReceiver(behaviour=redirect) as endpoint, WebhookRelay(endpoint.url) as relay:
            tasks = install_into(org, AlertSettings(relay.url))
            status, _ = run_task(org, tasks["reflex-localization-event"])
            assert len(endpoint.wait_for(1)) == 1
            time.sleep(0.5)
        assert elsewhere.received == []
    assert relay.refused == 1 and status == "failed"


def test_the_relay_delivers_to_a_well_behaved_endpoint(org: TestOrg) -> None:
    with WebhookReceiver() as endpoint, WebhookRelay(endpoint.url) as relay:
        tasks = install_into(org, AlertSettings(relay.url))
        status, _ = run_task(org, tasks["reflex-localization-event"])
        [received] = endpoint.wait_for(1)
    assert status == "success" and relay.forwarded == 1
    assert b"node" in received.body
