// Which nodes logged XIDs during this job?
// The job's nodes and time span come from its training steps; every XID those nodes logged
// in that span is listed, newest first.
import "date"

// Parameters: edit these lines.
telemetry_bucket = "telemetry"
cluster = "c1"
job = "job-1"
start = -7d

steps =
    from(bucket: telemetry_bucket)
        |> range(start: start)
        |> filter(fn: (r) => r._measurement == "train_step" and r._field == "step")
        |> filter(fn: (r) => r.cluster == cluster and r.job == job)
        |> group()
job_nodes =
    steps
        |> distinct(column: "node")
        |> findColumn(fn: (key) => true, column: "_value")
job_start = (steps |> min(column: "_time") |> findRecord(fn: (key) => true, idx: 0))._time
job_stop = (steps |> max(column: "_time") |> findRecord(fn: (key) => true, idx: 0))._time

from(bucket: telemetry_bucket)
    |> range(start: job_start, stop: date.add(d: 1s, to: job_stop))
    |> filter(fn: (r) => r._measurement == "event" and r.kind == "xid")
    |> filter(fn: (r) => contains(value: r._field, set: ["code", "gpu", "message"]))
    |> filter(fn: (r) => r.cluster == cluster and contains(value: r.node, set: job_nodes))
    |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")
    |> group()
    |> keep(columns: ["_time", "node", "gpu", "code", "message", "source"])
    |> sort(columns: ["_time"], desc: true)
