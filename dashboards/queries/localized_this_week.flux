// What did Reflex localize this week?
// Every localization event, newest first: the job, what triggered it, the top suspect, the
// confidence and the recommended action.

// Parameters: edit these lines.
results_bucket = "reflex"
cluster = "c1"
start = -7d
min_severity = 1

from(bucket: results_bucket)
    |> range(start: start)
    |> filter(fn: (r) => r._measurement == "reflex_event" and r.cluster == cluster)
    |> filter(
        fn: (r) =>
            contains(
                value: r._field,
                set: [
                    "event_id",
                    "severity",
                    "confidence",
                    "suspect_node",
                    "suspect_component",
                    "suspect_index",
                    "action",
                    "summary",
                ],
            ),
    )
    |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")
    |> filter(fn: (r) => r.severity >= min_severity)
    |> group()
    |> keep(
        columns: [
            "_time",
            "job",
            "trigger",
            "severity",
            "confidence",
            "suspect_node",
            "suspect_component",
            "suspect_index",
            "action",
            "summary",
            "event_id",
        ],
    )
    |> sort(columns: ["_time"], desc: true)
