// Keeps compound scores for the long term: the worst score of each node component per
// 5 minutes (and the signal and job of the latest one) go to the long-retention bucket.
// Runs start at a window boundary, so a window the previous run saw half of is rewritten whole.
import "date"

option task = {name: "reflex-downsample-scores", every: 1h, offset: 5m}

// Parameters: `reflex alerts install` rewrites these lines.
results_bucket = "reflex"
downsampled_bucket = "reflex_downsampled"
resolution = 5m

scores =
    from(bucket: results_bucket)
        |> range(start: date.truncate(t: date.sub(d: task.every, from: now()), unit: resolution))
        |> filter(fn: (r) => r._measurement == "reflex_score")

worst =
    scores
        |> filter(fn: (r) => r._field == "score")
        |> aggregateWindow(every: resolution, fn: max, createEmpty: false)

labels =
    scores
        |> filter(fn: (r) => r._field == "top_signal" or r._field == "job")
        |> aggregateWindow(every: resolution, fn: last, createEmpty: false)

union(tables: [worst, labels])
    |> to(bucket: downsampled_bucket)
