"""Node drill-down: every signal of one node against its own baseline and its peers' band."""

from __future__ import annotations

import json

from reflex_localize.dashboards.flux_parts import (
    bucket_constants,
    cluster_variable,
    events_annotation,
    node_variable,
    pipe,
    select,
    signal_variable,
)
from reflex_localize.dashboards.grafana_model import (
    RESULTS,
    SCORE_STEPS,
    TELEMETRY,
    Json,
    dashboard,
    grafana_unit,
    panel,
    row,
    target,
)
from reflex_localize.schemas.contract import Schema, load_schema

# Signals worth a panel, by measurement: gauges drawn as they are, counters as per-second rates.
# Units, help texts and tags come from the schema.
SIGNALS = {
    "gpu": (
        "temperature_celsius",
        "memory_temperature_celsius",
        "power_watts",
        "sm_clock_mhz",
        "utilization_gpu_ratio",
        "memory_used_bytes",
        "pcie_link_width",
        "nvlink_active_links",
    ),
    "host": (
        "cpu_busy_ratio",
        "memory_available_bytes",
        "psi_memory_some_avg10_ratio",
        "psi_io_some_avg10_ratio",
        "load1",
    ),
    "ib_port": ("port_xmit_wait", "port_xmit_data_bytes", "port_rcv_data_bytes", "symbol_error"),
}
# Tags that say where, not what: they never name a series of one node.
_PLACE_TAGS = {"cluster", "node", "profile", "link_layer"}
THIS_NODE = 'r.node == "${node}"'


def _entity_label(schema: Schema, measurement: str) -> str:
    """A Flux expression naming one series of the node, e.g. ``"gpu " + r.gpu``."""
    tags = [tag for tag in schema.measurement(measurement).tags if tag not in _PLACE_TAGS]
    return ' + " " + '.join(f'"{tag} " + r.{tag}' for tag in tags) or '"${node}"'


def _signal_panel(schema: Schema, measurement: str, field: str) -> Json:
    spec = schema.field(measurement, field)
    counter = spec.kind == "counter"
    steps = [
        "aggregateWindow(every: v.windowPeriod, fn: "
        + ("last" if counter else "mean")
        + ", createEmpty: false)"
    ]
    if counter:
        steps.append("derivative(unit: 1s, nonNegative: true)")
    label = _entity_label(schema, measurement)
    flux = "\n".join(
        [
            "data = " + pipe(select(TELEMETRY, measurement, [field]), *steps),
            "own = data",
            f"  |> filter(fn: (r) => {THIS_NODE})",
            "  |> map(fn: (r) => ({_time: r._time, _value: float(v: r._value), "
            f"series: {label}}}))",
            "peers = data",
            '  |> filter(fn: (r) => r.node != "${node}")',
            "  |> map(fn: (r) => ({_time: r._time, _value: float(v: r._value)}))",
            '  |> group(columns: ["_time"])',
            "band = (q, name) => peers",
            '  |> quantile(q: q, method: "exact_mean")',
            "  |> map(fn: (r) => ({_time: r._time, _value: r._value, series: name}))",
            "union(tables: [",
            "    own,",
            '    band(q: 0.1, name: "peers p10"),',
            '    band(q: 0.9, name: "peers p90"),',
            "  ])",
            '  |> group(columns: ["series"])',
            '  |> sort(columns: ["_time"])',
        ]
    )
    unit = grafana_unit(spec.unit)
    if counter:
        unit = "Bps" if spec.unit == "bytes" else "cps"
    return panel(
        "timeseries",
        f"{measurement} {field}" + (" (per second)" if counter else ""),
        [target(flux)],
        unit=unit,
        display_name="${__field.labels.series}",
        description=spec.help + ". Dashed band: the 10th-90th percentile of the other nodes.",
        overrides=[_band_style("peers p10"), _band_style("peers p90")],
        size=(8, 8),
    )


def _band_style(series: str) -> Json:
    return {
        "matcher": {"id": "byName", "options": series},
        "properties": [
            {"id": "color", "value": {"mode": "fixed", "fixedColor": "gray"}},
            {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
        ],
    }


def _score() -> Json:
    flux = pipe(
        select(RESULTS, "reflex_score", ["score"], THIS_NODE),
        "aggregateWindow(every: v.windowPeriod, fn: max, createEmpty: false)",
    )
    return panel(
        "timeseries",
        "Compound score by component",
        [target(flux)],
        steps=SCORE_STEPS,
        display_name="${__field.labels.component} ${__field.labels.index}",
        description="Reflex's compound anomaly score of each component of this node.",
        size=(12, 8),
    )


def _evidence() -> Json:
    flux = pipe(
        select(RESULTS, "reflex_score", ["score", "top_signal", "evidence"], THIS_NODE),
        'pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")',
        'last(column: "score")',
        "group()",
        'keep(columns: ["_time", "component", "index", "score", "top_signal", "evidence"])',
        'sort(columns: ["score"], desc: true)',
    )
    return panel(
        "table",
        "Latest evidence per component",
        [target(flux)],
        steps=SCORE_STEPS,
        description="The signal contributing most and the per-signal evidence (JSON).",
        rename={"_time": "time", "top_signal": "top signal"},
        size=(12, 8),
    )


RECORD_FIELDS = ("trouble", "reasons", "xids", "last_job", "last_job_clock_mhz")


def _record() -> Json:
    # Why a part is judged more quickly in this job, and the clock a drift event quotes: the
    # flow's record across jobs (flows/incidents/node_memory.py), exported every few windows.
    flux = pipe(
        select(RESULTS, "reflex_record", RECORD_FIELDS, THIS_NODE),
        'pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")',
        'last(column: "trouble")',
        "group()",
        "keep(columns: " + json.dumps(["_time", "component", "index", *RECORD_FIELDS]) + ")",
        'sort(columns: ["trouble"], desc: true)',
    )
    return panel(
        "table",
        "Record across jobs per component",
        [target(flux)],
        description="The trouble each part has given in this and earlier jobs (decaying over "
        "days), what fed it, its XIDs, and a GPU's SM clock in the last job it served. A "
        "part with a record is suspected on less evidence.",
        rename={
            "_time": "as of",
            "last_job": "last job",
            "last_job_clock_mhz": "clock in last job (MHz)",
        },
        size=(24, 6),
    )


def _baseline() -> Json:
    base = pipe(
        select(RESULTS, "reflex_baseline", ["center", "scale"], 'r.signal == "${signal}"'),
        "aggregateWindow(every: v.windowPeriod, fn: last, createEmpty: false)",
    )
    flux = "\n".join(
        [
            f"base = {base}",
            "own = base",
            f"  |> filter(fn: (r) => {THIS_NODE})",
            '  |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")',
            '  |> map(fn: (r) => ({r with entity: r.component + " " + r.index + " " + r.state}))',
            "line = (name, k) => own",
            "  |> map(fn: (r) => ({_time: r._time, _value: r.center + k * r.scale, "
            'series: r.entity + " " + name}))',
            "peers = base",
            '  |> filter(fn: (r) => r.node != "${node}" and r._field == "center")',
            '  |> group(columns: ["_time"])',
            "peer = (fn, name) => peers",
            "  |> fn()",
            "  |> map(fn: (r) => ({_time: r._time, _value: r._value, series: name}))",
            "union(tables: [",
            '    line(name: "center", k: 0.0),',
            '    line(name: "center + 3 scale", k: 3.0),',
            '    line(name: "center - 3 scale", k: -3.0),',
            '    peer(fn: min, name: "peers lowest center"),',
            '    peer(fn: max, name: "peers highest center"),',
            "  ])",
            '  |> group(columns: ["series"])',
            '  |> sort(columns: ["_time"])',
        ]
    )
    out = panel(
        "timeseries",
        "Baseline of ${signal}",
        [target(flux)],
        display_name="${__field.labels.series}",
        description="This node's longitudinal baseline (center +- 3 scale) and the range of "
        "its peers' centers for the same signal.",
        overrides=[_band_style("peers lowest center"), _band_style("peers highest center")],
        size=(8, 8),
    )
    out.update({"repeat": "signal", "repeatDirection": "h", "maxPerRow": 3})
    return out


def _agent_panel(schema: Schema, field: str, title: str, unit: str) -> Json:
    """The node agent's own health, one series per collector (``reflex_collector``)."""
    spec = schema.field("reflex_collector", field)
    flux = pipe(
        select(TELEMETRY, "reflex_collector", [field], THIS_NODE),
        "aggregateWindow(every: v.windowPeriod, fn: max, createEmpty: false)",
    )
    return panel(
        "timeseries",
        title,
        [target(flux)],
        unit=unit,
        display_name="${__field.labels.collector}",
        description=spec.help + ".",
        size=(8, 8),
    )


def _agent_panels(schema: Schema) -> list[Json]:
    # A clock off by seconds makes the node's points late for the flow: the agent corrects it
    # past 2 s, but the node's own logs and traces stay off until its time sync is fixed.
    return [
        row("agent: collectors and clock"),
        _agent_panel(schema, "clock_offset_seconds", "Clock offset from InfluxDB", "s"),
        _agent_panel(schema, "duration_seconds", "Collector run time", "s"),
        _agent_panel(schema, "errors", "Collector errors since start", "short"),
    ]


def build(schema: Schema | None = None) -> Json:
    schema = schema or load_schema()
    panels = [row("Score"), _score(), _evidence(), _record()]
    panels += [row("Baselines"), _baseline()]
    for measurement, fields in SIGNALS.items():
        panels.append(row(f"{measurement}: this node against its peers"))
        panels += [_signal_panel(schema, measurement, field) for field in fields]
    panels += _agent_panels(schema)
    return dashboard(
        "reflex-node",
        "Reflex / Node drill-down",
        panels,
        [*bucket_constants(), cluster_variable(), node_variable(), signal_variable()],
        [events_annotation()],
        description="One node: its score, its baselines and every signal against its peers.",
    )
