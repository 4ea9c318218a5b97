// Keeps baselines for the long term: the last center, scale and count of every entity and
// signal per hour go to the long-retention bucket.
// Runs start at a window boundary, so a window the previous run saw half of is rewritten whole.
import "date"
import "influxdata/influxdb/tasks"

option task = {name: "reflex-downsample-baselines", every: 1h}

// Parameters: `reflex alerts install` rewrites these lines.
results_bucket = "reflex"
downsampled_bucket = "reflex_downsampled"
resolution = 1h

from(bucket: results_bucket)
    |> range(start: date.truncate(t: tasks.lastSuccess(orTime: -task.every), unit: resolution))
    |> filter(fn: (r) => r._measurement == "reflex_baseline")
    |> filter(fn: (r) => contains(value: r._field, set: ["center", "scale", "count"]))
    |> aggregateWindow(every: resolution, fn: last, createEmpty: false)
    |> to(bucket: downsampled_bucket)
