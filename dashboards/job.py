"""Job view: step time per rank, throughput, and the suspects against their peers."""

from __future__ import annotations

from reflex_localize.dashboards.flux_parts import (
    bucket_constants,
    cluster_variable,
    events,
    events_annotation,
    job_variable,
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

IN_JOB = 'r.job == "${job}"'


def _steps(field: str) -> str:
    return select(TELEMETRY, "train_step", [field], IN_JOB)


def _step_time_per_rank() -> Json:
    flux = pipe(
        _steps("step_time_seconds"),
        "aggregateWindow(every: v.windowPeriod, fn: mean, createEmpty: false)",
    )
    return panel(
        "timeseries",
        "Step time per rank",
        [target(flux)],
        unit="s",
        display_name="rank ${__field.labels.rank} (${__field.labels.node})",
        description="Mean wall time of a step on each rank. One slow rank slows every rank.",
        options={"legend": {"displayMode": "table", "placement": "right", "calcs": ["mean"]}},
        size=(16, 9),
    )


def _throughput() -> Json:
    flux = pipe(
        _steps("tokens_per_second"),
        "aggregateWindow(every: v.windowPeriod, fn: mean, createEmpty: false)",
        'group(columns: ["_time"])',
        "sum()",
        "group()",
        'sort(columns: ["_time"])',
        'set(key: "series", value: "job throughput")',
    )
    return panel(
        "timeseries",
        "Throughput (whole job)",
        [target(flux)],
        unit="suffix: tok/s",
        display_name="tokens/s",
        description="Tokens per second summed over all ranks.",
        size=(8, 9),
    )


def _peer_band() -> Json:
    per_window = pipe(
        _steps("step_time_seconds"),
        "aggregateWindow(every: v.windowPeriod, fn: mean, createEmpty: false)",
        'group(columns: ["_time"])',
    )
    flux = "\n".join(
        [
            f"ranks = {per_window}",
            "band = (q, name) => ranks",
            '  |> quantile(q: q, method: "exact_selector")',
            '  |> keep(columns: ["_time", "_value"])',
            '  |> set(key: "series", value: name)',
            "union(tables: [",
            '    band(q: 0.5, name: "peer median"),',
            '    band(q: 0.9, name: "peer p90"),',
            '    band(q: 1.0, name: "slowest rank"),',
            "  ])",
            '  |> group(columns: ["series"])',
            '  |> sort(columns: ["_time"])',
        ]
    )
    return panel(
        "timeseries",
        "Step time: slowest rank against the peer band",
        [target(flux)],
        unit="s",
        display_name="${__field.labels.series}",
        description="Median and p90 of the ranks' step time, and the slowest rank, per interval.",
        size=(12, 9),
    )


def _relative_step_time() -> Json:
    per_rank = pipe(_steps("step_time_seconds"), 'group(columns: ["node", "rank"])', "mean()")
    flux = "\n".join(
        [
            f"per_rank = {per_rank}",
            "  |> group()",
            "job_median = (per_rank |> median() |> findRecord(fn: (key) => true, idx: 0))._value",
            "per_rank",
            '  |> map(fn: (r) => ({rank: "rank " + r.rank + " (" + r.node + ")", '
            "_value: r._value / job_median}))",
            '  |> sort(columns: ["_value"], desc: true)',
            "  |> limit(n: 16)",
        ]
    )
    return panel(
        "bargauge",
        "Step time relative to the job median (slowest first)",
        [target(flux)],
        unit="percentunit",
        steps=((1.1, "orange"), (1.3, "red")),
        description="Mean step time of each rank over the range divided by the median rank's.",
        options={
            "displayMode": "gradient",
            "orientation": "horizontal",
            "reduceOptions": {"values": True, "calcs": [], "fields": ""},
        },
        size=(12, 9),
    )


def _suspects() -> Json:
    flux = pipe(
        events(IN_JOB),
        'keep(columns: ["_time", "trigger", "severity", "confidence", "suspect_node", '
        '"suspect_component", "suspect_index", "action", "summary"])',
        'sort(columns: ["_time"], desc: true)',
    )
    return panel(
        "table",
        "Suspects localized in this job",
        [target(flux)],
        steps=SEVERITY_STEPS,
        description="Localization events of this job with their top suspect and action.",
        overrides=[
            {
                "matcher": {"id": "byName", "options": "confidence"},
                "properties": [{"id": "unit", "value": "percentunit"}],
            }
        ],
        rename={"_time": "time", "suspect_node": "suspect"},
        size=(24, 7),
    )


def _scores_of_job_nodes() -> Json:
    flux = pipe(
        select(RESULTS, "reflex_score", ["score", "job"]),
        'pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")',
        IN_JOB.join(("filter(fn: (r) => ", ")")),
        "map(fn: (r) => ({_time: r._time, _value: r.score, node: r.node}))",
        'group(columns: ["node"])',
        "aggregateWindow(every: v.windowPeriod, fn: max, createEmpty: false)",
    )
    return panel(
        "timeseries",
        "Compound score of the job's nodes against their peers",
        [target(flux)],
        steps=SCORE_STEPS,
        display_name="${__field.labels.node}",
        description="Worst component score of each node while it ran this job.",
        options={"legend": {"displayMode": "table", "placement": "right", "calcs": ["max"]}},
        size=(24, 9),
    )


def _comm_time() -> Json:
    flux = pipe(
        _steps("comm_seconds"),
        "aggregateWindow(every: v.windowPeriod, fn: mean, createEmpty: false)",
    )
    return panel(
        "timeseries",
        "Communication time per rank",
        [target(flux)],
        unit="s",
        display_name="rank ${__field.labels.rank} (${__field.labels.node})",
        description="Time in collectives, waiting for peers included: the victims of a slow "
        "rank wait longest, the culprit least.",
        size=(24, 8),
    )


def build() -> Json:
    panels = [
        row("Progress"),
        _step_time_per_rank(),
        _throughput(),
        _peer_band(),
        _relative_step_time(),
        _comm_time(),
        row("Suspects"),
        _suspects(),
        _scores_of_job_nodes(),
    ]
    return dashboard(
        "reflex-job",
        "Reflex / Job",
        panels,
        [*bucket_constants(), cluster_variable(), job_variable()],
        [events_annotation(IN_JOB)],
        description="One training job: progress per rank and the suspects against their peers.",
    )
