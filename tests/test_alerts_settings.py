"""Alert settings and task rendering, without a server."""

from __future__ import annotations

import re

import pytest

from reflex_localize.dashboards.alerts import (
    AlertConfigError,
    AlertSettings,
    critical_xids,
    rendered_tasks,
    scripts,
)
from reflex_localize.influx.flux_literals import Duration, set_params


@pytest.mark.parametrize(
    "url",
    [
        "ftp://hooks.example.com/x",
        "https://user:pass@hooks.example.com/x",
        "https:///no-host",
        "https://hooks.example.com/x#frag",
        "hooks.example.com/x",
    ],
)
def test_unsafe_or_unusable_webhook_urls_are_refused(url: str) -> None:
    with pytest.raises(AlertConfigError):
        AlertSettings(url)


def test_pagerduty_needs_a_routing_key_and_severity_is_1_to_3() -> None:
    with pytest.raises(AlertConfigError, match="routing key"):
        AlertSettings("https://events.pagerduty.com/v2/enqueue", payload_format="pagerduty")
    with pytest.raises(AlertConfigError, match="min_severity"):
        AlertSettings("https://h.example.com/x", min_severity=4)


def test_every_script_has_a_name_and_every_parameter_line() -> None:
    settings = AlertSettings("https://h.example.com/x", min_severity=3, clock_skew_threshold_s=5)
    rendered = rendered_tasks(settings)
    assert len(rendered) == len(scripts()) == 6
    assert all(name.startswith("reflex-") for name in rendered)
    assert "min_severity = 3" in rendered["reflex-localization-event"]
    assert "threshold_seconds = 5.0" in rendered["reflex-clock-skew"]


def test_the_checked_in_critical_xid_list_matches_the_hardware_profiles() -> None:
    text = scripts()["critical_xid"]
    match = re.search(r"^critical_xids = \[([\d, ]+)\]$", text, re.MULTILINE)
    assert match is not None
    assert [int(code) for code in match[1].split(",")] == critical_xids()
    assert {48, 79, 95} <= set(critical_xids()) and 13 not in critical_xids()


def test_parameters_are_written_as_flux_literals_without_interpolation() -> None:
    text = 'bucket = "x"\nsilence = 5m\nfrom(bucket: bucket)'
    out = set_params(text, {"bucket": 'a"${b}', "silence": Duration("90s")})
    assert out.splitlines()[:2] == ['bucket = "a\\"\\${b}"', "silence = 90s"]
    with pytest.raises(KeyError):
        set_params(text, {"missing": 1})
    with pytest.raises(ValueError):
        Duration("5 minutes")
