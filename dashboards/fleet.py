"""Fleet overview: health by node, top compound scores, localization events, error counters."""

from __future__ import annotations

from reflex_localize.dashboards.flux_parts import (
    bucket_constants,
    cluster_variable,
    events,
    events_annotation,
    field_predicate,
    pipe,
    select,
)
from reflex_localize.dashboards.grafana_model import (
    RESULTS,
    SCORE_STEPS,
    SEVERITY_STEPS,
    TELEMETRY,
    Json,
    dashboard,
    panel,
    row,
    target,
)

# Counters whose growth means hardware trouble, by measurement.
ERROR_COUNTERS = {
    "gpu": ("ecc_uncorrected_volatile", "ecc_corrected_volatile", "pcie_replay_errors"),
    "gpu_nvlink": ("crc_flit_errors", "crc_data_errors", "replay_errors", "recovery_errors"),
    "ib_port": (
        "symbol_error",
        "link_error_recovery",
        "link_downed",
        "port_rcv_errors",
        "port_xmit_discards",
    ),
}


def _node_health() -> Json:
    flux = pipe(
        select(RESULTS, "reflex_score", ["score"]),
        'group(columns: ["node"])',
        "max()",
        "group()",
        'keep(columns: ["node", "component", "index", "_value", "_time"])',
        'sort(columns: ["_value"], desc: true)',
    )
    drill = {
        "title": "Node drill-down",
        "url": "/d/reflex-node?var-cluster=${cluster}&var-node=${__data.fields.node}"
        "&${__url_time_range}",
    }
    return panel(
        "table",
        "Health by node (worst component score)",
        [target(flux)],
        unit="short",
        steps=SCORE_STEPS,
        description="Each node's highest compound score in the time range, worst first.",
        options={"cellHeight": "sm", "showHeader": True},
        overrides=[
            {
                "matcher": {"id": "byName", "options": "_value"},
                "properties": [{"id": "custom.cellOptions", "value": {"type": "color-background"}}],
            }
        ],
        links=[drill],
        rename={"_value": "max score", "_time": "at", "component": "worst component"},
        size=(8, 10),
    )


def _top_scores() -> Json:
    flux = pipe(
        select(RESULTS, "reflex_score", ["score"]),
        'group(columns: ["node", "component", "index"])',
        "last()",
        "group()",
        "top(n: 10)",
        'map(fn: (r) => ({entity: r.node + " " + r.component + " " + r.index, _value: r._value}))',
    )
    return panel(
        "bargauge",
        "Top compound scores (latest)",
        [target(flux)],
        steps=SCORE_STEPS,
        description="The ten node components with the highest latest compound score.",
        options={
            "displayMode": "gradient",
            "orientation": "horizontal",
            "reduceOptions": {"values": True, "calcs": [], "fields": ""},
        },
        size=(8, 10),
    )


def _score_by_node() -> Json:
    flux = pipe(
        select(RESULTS, "reflex_score", ["score"]),
        'group(columns: ["node"])',
        "aggregateWindow(every: v.windowPeriod, fn: max, createEmpty: false)",
    )
    return panel(
        "timeseries",
        "Compound score by node",
        [target(flux)],
        steps=SCORE_STEPS,
        display_name="${__field.labels.node}",
        description="Worst component score per node over time; dashed lines are the thresholds.",
        options={"legend": {"displayMode": "table", "placement": "right", "calcs": ["max"]}},
        size=(8, 10),
    )


def _events_table() -> Json:
    flux = pipe(
        events(),
        'keep(columns: ["_time", "job", "trigger", "severity", "confidence", "suspect_node", '
        '"suspect_component", "suspect_index", "action", "summary"])',
        'sort(columns: ["_time"], desc: true)',
    )
    return panel(
        "table",
        "Localization events",
        [target(flux)],
        steps=SEVERITY_STEPS,
        description="Every localization event in the range: one per incident, newest first.",
        overrides=[
            {
                "matcher": {"id": "byName", "options": "confidence"},
                "properties": [{"id": "unit", "value": "percentunit"}],
            },
            {
                "matcher": {"id": "byName", "options": "severity"},
                "properties": [{"id": "custom.cellOptions", "value": {"type": "color-background"}}],
            },
        ],
        rename={"_time": "time", "suspect_node": "suspect"},
        size=(24, 8),
    )


def _events_by_kind() -> Json:
    flux = pipe(
        select(TELEMETRY, "event", ["code"]),
        'group(columns: ["kind"])',
        "aggregateWindow(every: v.windowPeriod, fn: count, createEmpty: false)",
    )
    return panel(
        "timeseries",
        "Events by kind",
        [target(flux)],
        display_name="${__field.labels.kind}",
        description="Kernel, NVML and training events per interval (XID, link down, NCCL...).",
        options={"legend": {"displayMode": "list", "placement": "bottom"}},
        size=(8, 9),
    )


def _xids_by_code() -> Json:
    flux = pipe(
        select(TELEMETRY, "event", ["code"], 'r.kind == "xid"'),
        "map(fn: (r) => ({r with code: string(v: r._value)}))",
        'group(columns: ["code"])',
        "count()",
        "group()",
        'sort(columns: ["_value"], desc: true)',
    )
    return panel(
        "table",
        "XIDs by code",
        [target(flux)],
        description="How many times each XID was logged in the range, across the cluster.",
        rename={"_value": "count"},
        size=(6, 9),
    )


def _error_counters() -> Json:
    selectors = " or\n      ".join(
        f'(r._measurement == "{measurement}" and {field_predicate(fields)})'
        for measurement, fields in ERROR_COUNTERS.items()
    )
    flux = "\n".join(
        [
            f'from(bucket: "{TELEMETRY}")',
            "  |> range(start: v.timeRangeStart, stop: v.timeRangeStop)",
            f"  |> filter(fn: (r) =>\n      {selectors})",
            '  |> filter(fn: (r) => r.cluster == "${cluster}")',
            # Max per window in storage, then growth between windows: cheap on a whole fleet.
            "  |> aggregateWindow(every: v.windowPeriod, fn: max, createEmpty: false)",
            "  |> difference(nonNegative: true)",
            '  |> group(columns: ["_measurement", "_field"])',
            "  |> sum()",
            "  |> group()",
            '  |> map(fn: (r) => ({counter: r._measurement + " " + r._field, _value: r._value}))',
            '  |> sort(columns: ["_value"], desc: true)',
        ]
    )
    return panel(
        "bargauge",
        "Hardware error counters (growth in range)",
        [target(flux)],
        steps=((1.0, "orange"), (100.0, "red")),
        description="How much each error counter grew across the cluster (resets handled).",
        options={
            "displayMode": "basic",
            "orientation": "horizontal",
            "reduceOptions": {"values": True, "calcs": [], "fields": ""},
        },
        size=(10, 9),
    )


def _alarm_rate() -> Json:
    # Each job's latest count and node-hours; the fleet's hours from the "all" rows, which
    # every job writes, so that a trigger's rate counts the jobs where it never fired.
    rates = pipe(
        select(RESULTS, "reflex_alarm_rate", ["events", "node_hours"]),
        "last()",
    )
    flux = "\n".join(
        [
            f"rates = {rates}",
            "hours = rates",
            '  |> filter(fn: (r) => r.trigger == "all" and r._field == "node_hours")',
            "  |> group()",
            "  |> sum()",
            '  |> findColumn(fn: (key) => true, column: "_value")',
            "total = if length(arr: hours) > 0 then hours[0] else 0.0",
            "rates",
            '  |> filter(fn: (r) => r._field == "events")',
            '  |> group(columns: ["trigger"])',
            "  |> sum()",
            "  |> group()",
            "  |> map(fn: (r) => ({trigger: r.trigger, events: r._value, node_hours: total,",
            "      per_1k_node_hours: if total > 0.0 then 1000.0 * float(v: r._value) / total"
            " else 0.0}))",
            '  |> sort(columns: ["per_1k_node_hours"], desc: true)',
        ]
    )
    return panel(
        "table",
        "Alarm rate by trigger (hardware-blaming events per 1,000 node-hours)",
        [target(flux)],
        steps=((0.5, "orange"), (1.0, "red")),
        description="Events that named a part, by trigger, against the node-hours judged in the"
        " range; 'all' is every trigger. The flow's alarm budget (default 0.5) is the target.",
        size=(12, 8),
    )


def _alarm_bars() -> Json:
    flux = pipe(
        select(RESULTS, "reflex_alarm_bar", ["bar"]),
        'group(columns: ["statistic"])',
        "aggregateWindow(every: v.windowPeriod, fn: max, createEmpty: false)",
    )
    return panel(
        "timeseries",
        "Trigger bars learned from this fleet (highest across jobs)",
        [target(flux)],
        display_name="${__field.labels.statistic}",
        description="The bar each trigger statistic must pass: its fixed prior, raised to the"
        " tail of this fleet's own history that the alarm budget allows.",
        options={"legend": {"displayMode": "list", "placement": "bottom"}},
        size=(12, 8),
    )


def build() -> Json:
    panels = [
        row("Health"),
        _node_health(),
        _top_scores(),
        _score_by_node(),
        row("Localization"),
        _events_table(),
        _alarm_rate(),
        _alarm_bars(),
        row("Errors"),
        _events_by_kind(),
        _xids_by_code(),
        _error_counters(),
    ]
    return dashboard(
        "reflex-fleet",
        "Reflex / Fleet overview",
        panels,
        [*bucket_constants(), cluster_variable()],
        [events_annotation()],
        description="Which nodes are unhealthy, what Reflex localized, and which errors grow.",
    )
