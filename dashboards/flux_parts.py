"""Flux fragments shared by the dashboards: selections, template variables, annotations.

Queries use Grafana's ``v.timeRangeStart``, ``v.timeRangeStop`` and ``v.windowPeriod`` and
the dashboard variables ``${cluster}``, ``${job}``, ``${node}``, ``${signal}`` plus the hidden
bucket constants ``${telemetry_bucket}`` and ``${results_bucket}``.

>>> print(select("${telemetry_bucket}", "gpu", ["power_watts"]))
from(bucket: "${telemetry_bucket}")
  |> range(start: v.timeRangeStart, stop: v.timeRangeStop)
  |> filter(fn: (r) => r._measurement == "gpu" and r._field == "power_watts")
  |> filter(fn: (r) => r.cluster == "${cluster}")
"""

from __future__ import annotations

from collections.abc import Sequence

from reflex_localize.dashboards.grafana_model import (
    RESULTS,
    TELEMETRY,
    Json,
    annotation,
    constant,
    query_variable,
)
from reflex_localize.influx.flux_literals import flux_any_of

EVENT_COLUMNS = (
    "severity",
    "confidence",
    "suspect_node",
    "suspect_component",
    "suspect_index",
    "action",
    "summary",
)


def field_predicate(fields: Sequence[str]) -> str:
    """The fields' equality tests joined by ``or`` (:func:`influx.flux_literals.flux_any_of`)."""
    return flux_any_of("r._field", fields)


def select(bucket: str, measurement: str, fields: Sequence[str], *where: str) -> str:
    """Rows of some fields of one measurement in the dashboard's cluster and time range."""
    lines = [
        f'from(bucket: "{bucket}")',
        "  |> range(start: v.timeRangeStart, stop: v.timeRangeStop)",
        f'  |> filter(fn: (r) => r._measurement == "{measurement}" and {field_predicate(fields)})',
        '  |> filter(fn: (r) => r.cluster == "${cluster}")',
    ]
    lines += [f"  |> filter(fn: (r) => {predicate})" for predicate in where]
    return "\n".join(lines)


def pipe(source: str, *steps: str) -> str:
    return "\n".join([source, *(f"  |> {step}" for step in steps)])


def events(*where: str) -> str:
    """Localization events, one row each, with their fields as columns."""
    return pipe(
        select(RESULTS, "reflex_event", ["event_id", *EVENT_COLUMNS], *where),
        'pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")',
        "group()",
    )


def events_annotation(*where: str) -> Json:
    flux = pipe(
        events(*where),
        "map(fn: (r) => ({\n"
        "      _time: r._time,\n"
        '      title: "Reflex " + r.trigger + " in " + r.job + ": " + r.suspect_node,\n'
        '      text: r.summary + " (action: " + r.action + ")",\n'
        '      tags: r.job + "," + r.trigger,\n'
        "    }))",
    )
    return annotation("Localization events", flux)


def _tag_values(bucket: str, tag: str, predicate: str) -> str:
    return (
        'import "influxdata/influxdb/schema"\n\n'
        "schema.tagValues(\n"
        f'  bucket: "{bucket}",\n'
        f'  tag: "{tag}",\n'
        f"  predicate: (r) => {predicate},\n"
        "  start: v.timeRangeStart,\n"
        "  stop: v.timeRangeStop,\n"
        ")"
    )


def cluster_variable() -> Json:
    return query_variable(
        "cluster", "Cluster", _tag_values(TELEMETRY, "cluster", 'r._measurement == "host"')
    )


def job_variable() -> Json:
    predicate = 'r._measurement == "train_step" and r.cluster == "${cluster}"'
    return query_variable("job", "Job", _tag_values(TELEMETRY, "job", predicate))


def node_variable() -> Json:
    predicate = 'r._measurement == "host" and r.cluster == "${cluster}"'
    return query_variable("node", "Node", _tag_values(TELEMETRY, "node", predicate))


def signal_variable() -> Json:
    predicate = (
        'r._measurement == "reflex_baseline" and r.cluster == "${cluster}" and r.node == "${node}"'
    )
    return query_variable("signal", "Signal", _tag_values(RESULTS, "signal", predicate), multi=True)


def bucket_constants() -> list[Json]:
    """Where telemetry and Reflex's results live; change them here for a whole dashboard."""
    return [constant("telemetry_bucket", "telemetry"), constant("results_bucket", "reflex")]
