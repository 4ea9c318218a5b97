// How does this GPU look against its 30-day baseline?
// For every signal Reflex keeps for the GPU: the latest baseline center and spread, the
// median center over the period, and how far the GPU drifted, in units of its spread.
// Signals are Reflex's derived signals (flows/signals/derive.py), such as temperature_high.
// Parameters: edit these lines.
results_bucket = "reflex"
cluster = "c1"
node = "n03"
gpu = "1"
// The GPU's baseline in one workload state: busy, idle or checkpoint (any where the node sent
// no GPU utilization, so one baseline serves every state).
state = "busy"
start = -30d

baseline =
    from(bucket: results_bucket)
        |> range(start: start)
        |> filter(fn: (r) => r._measurement == "reflex_baseline")
        |> filter(fn: (r) => r._field == "center" or r._field == "scale")
        |> filter(fn: (r) => r.cluster == cluster and r.node == node)
        |> filter(fn: (r) => r.component == "gpu" and r.index == gpu and r.state == state)
latest =
    baseline
        |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")
        |> group(columns: ["signal"])
        |> last(column: "center")
now_center = latest |> map(fn: (r) => ({signal: r.signal, name: "center_now", _value: r.center}))
now_scale = latest |> map(fn: (r) => ({signal: r.signal, name: "scale_now", _value: r.scale}))
usual_center =
    baseline
        |> filter(fn: (r) => r._field == "center")
        |> group(columns: ["signal"])
        |> median()
        |> map(fn: (r) => ({signal: r.signal, name: "center_median", _value: r._value}))

union(tables: [now_center, now_scale, usual_center])
    |> group()
    |> pivot(rowKey: ["signal"], columnKey: ["name"], valueColumn: "_value")
    |> map(fn: (r) => ({r with drift_in_scales: (r.center_now - r.center_median) / r.scale_now}))
    |> sort(columns: ["drift_in_scales"], desc: true)
