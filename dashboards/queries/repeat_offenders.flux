// Which nodes are repeat offenders?
// Nodes named top suspect by at least `min_events` localization events in the period, with
// how many events, the worst severity and when it last happened, worst first.

// Parameters: edit these lines.
results_bucket = "reflex"
cluster = "c1"
start = -30d
min_events = 2

from(bucket: results_bucket)
    |> range(start: start)
    |> filter(fn: (r) => r._measurement == "reflex_event" and r.cluster == cluster)
    |> filter(fn: (r) => r._field == "suspect_node" or r._field == "severity")
    |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")
    |> filter(fn: (r) => r.suspect_node != "")
    |> group(columns: ["suspect_node"])
    |> reduce(
        identity: {events: 0, worst_severity: 0, last_seen: time(v: 0)},
        fn: (r, accumulator) =>
            ({
                events: accumulator.events + 1,
                worst_severity:
                    if r.severity > accumulator.worst_severity then
                        r.severity
                    else
                        accumulator.worst_severity,
                last_seen: if r._time > accumulator.last_seen then r._time else accumulator.last_seen,
            }),
    )
    |> filter(fn: (r) => r.events >= min_events)
    |> group()
    |> sort(columns: ["events", "worst_severity"], desc: true)
