// Keeps baselines for the long term: the last center, scale and count of every entity and
// signal per hour go to the long-retention bucket.
// Runs start at a window boundary, so a window the previous run saw half of is rewritten whole.
import "date"

option task = {name: "reflex-downsample-baselines", every: 1h, offset: 5m}

// Parameters: `reflex alerts install` rewrites these lines.
results_bucket = "reflex"
downsampled_bucket = "reflex_downsampled"
resolution = 1h

from(bucket: results_bucket)
    |> range(start: date.truncate(t: date.sub(d: task.every, from: now()), unit: resolution))
    |> filter(fn: (r) => r._measurement == "reflex_baseline")
    // == joined by or: InfluxDB pushes it down to storage; contains() it does not.
    |> filter(fn: (r) => r._field == "center" or r._field == "scale" or r._field == "count")
    |> aggregateWindow(every: resolution, fn: last, createEmpty: false)
    |> to(bucket: downsampled_bucket)
