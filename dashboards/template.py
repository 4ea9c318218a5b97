"""Reflex's InfluxDB template: what ``influx apply`` (and ``reflex setup``) installs as one stack.

One source builds both the checked-in ``influx/template/reflex.json`` (defaults, for operators
who use the ``influx`` CLI) and what ``reflex setup`` applies (the operator's settings):

- buckets ``telemetry``, ``reflex`` and ``reflex_downsampled``, with their retention;
- the alert and downsampling tasks of ``dashboards/alerts/`` (their ``option task`` line becomes
  the template's ``every``/``offset``, since InfluxDB writes that line itself);
- real checks, whose statuses land in ``_monitoring`` and show under Alerts in the UI: the
  severity of localization events, the compound score of node components, and a deadman on the
  collectors' self-metrics. No notification rule sends their statuses: the tasks already post
  each event and each silent collector, and a rule would post them a second time;
- a ``reflex`` label on all of it, and variables naming the buckets and the nodes.

>>> resources = build(TemplateSettings(AlertSettings("http://127.0.0.1:9099/")))
>>> sorted({r["kind"] for r in resources})[:3]
['Bucket', 'CheckDeadman', 'CheckThreshold']
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reflex_localize.dashboards.alerts import AlertSettings, rendered_tasks
from reflex_localize.influx.flux_literals import Duration, flux_string

API_VERSION = "influxdata.com/v2alpha1"
LABEL = "reflex"
CHECK_TAG = {"key": "source", "value": "reflex"}
# The template as `influx apply -f` takes it, rendered with the defaults below.
TEMPLATE_FILE = Path(__file__).resolve().parents[1] / "influx" / "template" / "reflex.json"
# Where `reflex alerts relay` listens by default: where `reflex setup` has the tasks post.
DEFAULT_WEBHOOK_URL = "http://127.0.0.1:9099/"
ONE_MINUTE, ONE_DAY = Duration("1m"), Duration("24h")
_TASK_OPTION = re.compile(r"^option task = \{([^}]*)\}\n", re.MULTILINE)
_TASK_FIELD = re.compile(r"(\w+): (\"[^\"]*\"|[^,\s]+)")

Json = dict[str, Any]


@dataclass(frozen=True)
class TemplateSettings:
    """What an operator may choose; the alert settings name the buckets and the webhook."""

    alerts: AlertSettings
    telemetry_retention_days: int = 30
    results_retention_days: int = 400
    check_every: Duration = ONE_MINUTE
    # How far back the deadman looks for a node's last report: past it, a node is forgotten.
    deadman_stale: Duration = ONE_DAY

    def __post_init__(self) -> None:
        for days in (self.telemetry_retention_days, self.results_retention_days):
            if days < 0:
                raise ValueError("retention is a number of days, 0 for forever")


def resource(kind: str, meta_name: str, spec: Json) -> Json:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": meta_name}, "spec": spec}


def _labelled(spec: Json) -> Json:
    return {**spec, "associations": [{"kind": "Label", "name": LABEL}]}


def _bucket(name: str, retention_days: int, description: str) -> Json:
    rules = [{"type": "expire", "everySeconds": retention_days * 86400}] if retention_days else []
    spec = {"name": name, "description": description, "retentionRules": rules}
    return resource("Bucket", f"bucket-{_meta(name)}", _labelled(spec))


def _meta(name: str) -> str:
    """A template metadata name (lower case, digits and dashes) for a resource name."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def buckets(settings: TemplateSettings) -> list[Json]:
    alerts = settings.alerts
    return [
        _bucket(alerts.telemetry_bucket, settings.telemetry_retention_days, "Reflex telemetry"),
        _bucket(alerts.results_bucket, settings.results_retention_days, "Reflex results"),
        _bucket(
            alerts.downsampled_bucket,
            alerts.downsampled_retention_days,
            "Reflex scores and baselines, downsampled for the long term",
        ),
    ]


def tasks(settings: TemplateSettings) -> list[Json]:
    """The tasks of dashboards/alerts/, their schedule moved from the Flux into the spec."""
    out = []
    for name, flux in rendered_tasks(settings.alerts).items():
        option = _TASK_OPTION.search(flux)
        if option is None:
            raise ValueError(f"task {name} has no one-line `option task = {{...}}`")
        fields = dict(_TASK_FIELD.findall(option[1]))
        spec: Json = {"name": name, "every": fields["every"], "query": _TASK_OPTION.sub("", flux)}
        if "offset" in fields:
            spec["offset"] = fields["offset"]
        out.append(resource("Task", _meta(name), _labelled(spec)))
    return out


def _check_query(bucket: str, measurement: str, field: str, every: Duration) -> str:
    # The shape InfluxDB's check builder expects: one field, aggregateWindow, v.timeRange*.
    # toFloat: thresholds are floats, and Flux will not compare an int field with one.
    return (
        f"from(bucket: {flux_string(bucket)})\n"
        "  |> range(start: v.timeRangeStart, stop: v.timeRangeStop)\n"
        f'  |> filter(fn: (r) => r._measurement == "{measurement}" and r._field == "{field}")\n'
        f"  |> aggregateWindow(every: {every.text}, fn: max, createEmpty: false)\n"
        "  |> toFloat()\n"
    )


def checks(settings: TemplateSettings) -> list[Json]:
    alerts, every = settings.alerts, settings.check_every
    event_severity = {
        "name": "reflex-event-severity",
        "description": "Severity of Reflex's localization events (3 critical, 2 warning, 1 info)",
        "every": every.text,
        "query": _check_query(alerts.results_bucket, "reflex_event", "severity", every),
        "statusMessageTemplate": (
            "Reflex ${r._level}: ${r.cluster}/${r.job}: localization event "
            "(trigger ${r.trigger}, severity ${string(v: r.severity)})"
        ),
        "tags": [CHECK_TAG],
        "thresholds": [
            {"type": "greater", "level": "CRIT", "value": 2.5},
            {"type": "greater", "level": "WARN", "value": 1.5},
            {"type": "greater", "level": "INFO", "value": 0.5},
        ],
    }
    node_score = {
        "name": "reflex-node-score",
        "description": "Compound anomaly score of node components (see SCORE_STEPS of the boards)",
        "every": every.text,
        "query": _check_query(alerts.results_bucket, "reflex_score", "score", every),
        "statusMessageTemplate": (
            "Reflex ${r._level}: ${r.cluster}/${r.node} ${r.component} ${r.index}: "
            "compound score ${string(v: r.score)}"
        ),
        "tags": [CHECK_TAG],
        "thresholds": [
            {"type": "greater", "level": "CRIT", "value": 4.0},
            {"type": "greater", "level": "WARN", "value": 2.0},
        ],
    }
    collector_silent = {
        "name": "reflex-collector-silent",
        "description": "A node's collectors stopped reporting (reflex_collector self-metrics)",
        "every": every.text,
        "query": (
            f"from(bucket: {flux_string(alerts.telemetry_bucket)})\n"
            "  |> range(start: v.timeRangeStart, stop: v.timeRangeStop)\n"
            '  |> filter(fn: (r) => r._measurement == "reflex_collector" '
            'and r._field == "duration_seconds")\n'
        ),
        "level": "CRIT",
        "timeSince": alerts.silence.text,
        "staleTime": settings.deadman_stale.text,
        "reportZero": False,
        "statusMessageTemplate": (
            "Reflex ${r._level}: ${r.cluster}/${r.node}: collector ${r.collector} silent: "
            "${string(v: r.dead)}"
        ),
        "tags": [CHECK_TAG],
    }
    return [
        resource("CheckThreshold", "check-event-severity", _labelled(event_severity)),
        resource("CheckThreshold", "check-node-score", _labelled(node_score)),
        resource("CheckDeadman", "check-collector-silent", _labelled(collector_silent)),
    ]


def variables(settings: TemplateSettings) -> list[Json]:
    alerts = settings.alerts

    def constant(name: str, value: str) -> Json:
        spec = {"name": name, "type": "constant", "values": [value]}
        return resource("Variable", f"variable-{_meta(name)}", _labelled(spec))

    nodes = {
        "name": "reflex_node",
        "description": "Nodes that sent telemetry",
        "type": "query",
        "language": "flux",
        "query": (
            'import "influxdata/influxdb/schema"\n'
            f'schema.tagValues(bucket: {flux_string(alerts.telemetry_bucket)}, tag: "node")\n'
        ),
    }
    return [
        constant("reflex_telemetry_bucket", alerts.telemetry_bucket),
        constant("reflex_results_bucket", alerts.results_bucket),
        resource("Variable", "variable-reflex-node", _labelled(nodes)),
    ]


def build(settings: TemplateSettings) -> list[Json]:
    """The template's resources, in the order ``influx apply`` would print them."""
    label = resource("Label", LABEL, {"name": LABEL, "color": "#7A65F2",
                                      "description": "Installed by reflex setup"})  # fmt: skip
    return [
        label,
        *buckets(settings),
        *variables(settings),
        *checks(settings),
        *tasks(settings),
    ]


def render(resources: list[Json]) -> str:
    return json.dumps(resources, indent=2) + "\n"


def default_template() -> str:
    """The checked-in template: the defaults (the tasks post to the org's webhook secret)."""
    return render(build(TemplateSettings(AlertSettings(DEFAULT_WEBHOOK_URL))))
