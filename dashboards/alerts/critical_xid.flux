// Notifies an HTTP endpoint of every critical XID (severity "critical" in
// schemas/hardware/nvidia-xid.toml; `reflex alerts install` writes the current list).
import "http/requests"
import "json"
import "influxdata/influxdb/secrets"

option task = {name: "reflex-critical-xid", every: 1m, offset: 30s}

// Parameters: `reflex alerts install` rewrites these lines.
telemetry_bucket = "telemetry"
critical_xids = [48, 62, 64, 74, 79, 94, 95, 119, 120]
webhook_timeout = 10s

webhook_url = secrets.get(key: "reflex_alert_webhook_url")
post = (r) =>
    requests.post(
        url: webhook_url,
        headers: ["Content-Type": "application/json"],
        body:
            json.encode(
                v: {
                    text: "[Reflex critical] ${r.cluster}/${r.node}: XID ${string(v: r._value)}",
                    source: "reflex",
                    kind: "critical_xid",
                    cluster: r.cluster,
                    node: r.node,
                    xid: r._value,
                    time: r._time,
                },
            ),
        config: {insecureSkipVerify: false, timeout: webhook_timeout},
    )

from(bucket: telemetry_bucket)
    |> range(start: -task.every)
    |> filter(fn: (r) => r._measurement == "event" and r.kind == "xid" and r._field == "code")
    |> filter(fn: (r) => contains(value: r._value, set: critical_xids))
    |> group()
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
