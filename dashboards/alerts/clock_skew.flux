// Notifies an HTTP endpoint once when a node's clock drifts away from InfluxDB's: the agent
// measures the offset from the Date of every write answer (reflex_collector
// clock_offset_seconds). A node is notified when its first sample past the threshold within
// the last `quiet` falls in this run's interval: once per episode, not once per run. Its
// points are stamped with the server's time meanwhile, but logs, NCCL traces and checkpoints
// on that node still carry the wrong time, so the time sync needs fixing.
import "date"
import "http/requests"
import "json"
import "math"
import "influxdata/influxdb/secrets"

option task = {name: "reflex-clock-skew", every: 5m}

// Parameters: `reflex alerts install` rewrites these lines.
telemetry_bucket = "telemetry"
threshold_seconds = 2.0
quiet = 6h
webhook_timeout = 10s

webhook_url = secrets.get(key: "reflex_alert_webhook_url")
onset_after = date.sub(d: task.every, from: now())
post = (r) =>
    requests.post(
        url: webhook_url,
        headers: ["Content-Type": "application/json"],
        body:
            json.encode(
                v: {
                    text:
                        "[Reflex warning] ${r.cluster}/${r.node}: clock off by "
                            + "${string(v: r._value)} s from InfluxDB's; fix its time sync "
                            + "(chronyc tracking)",
                    source: "reflex",
                    kind: "clock_skew",
                    cluster: r.cluster,
                    node: r.node,
                    offset_seconds: r._value,
                    since: r._time,
                },
            ),
        config: {insecureSkipVerify: false, timeout: webhook_timeout},
    )

from(bucket: telemetry_bucket)
    |> range(start: -quiet)
    |> filter(
        fn: (r) => r._measurement == "reflex_collector" and r._field == "clock_offset_seconds",
    )
    |> filter(fn: (r) => math.abs(x: r._value) > threshold_seconds)
    |> group(columns: ["cluster", "node"])
    |> first()
    |> filter(fn: (r) => r._time >= onset_after)
    |> map(
        fn: (r) => {
            response = post(r: r)

            return
                if response.statusCode < 300 then
                    {_time: r._time, node: r.node, status: response.statusCode}
                else
                    die(msg: "webhook answered HTTP ${string(v: response.statusCode)}")
        },
    )
