// Notifies an HTTP endpoint once for each node whose collectors went silent: the run whose
// window [now - silence - every, now - silence) holds the node's last self-metric point.
import "date"
import "http/requests"
import "json"
import "influxdata/influxdb/secrets"

option task = {name: "reflex-collector-deadman", every: 1m}

// Parameters: `reflex alerts install` rewrites these lines.
telemetry_bucket = "telemetry"
silence = 5m
lookback = 24h
webhook_timeout = 10s

webhook_url = secrets.get(key: "reflex_alert_webhook_url")
silent_before = date.sub(d: silence, from: now())
silent_after = date.sub(d: task.every, from: silent_before)
post = (r) =>
    requests.post(
        url: webhook_url,
        headers: ["Content-Type": "application/json"],
        body:
            json.encode(
                v: {
                    text:
                        "[Reflex critical] ${r.cluster}/${r.node}: no collector report since "
                            + "${string(v: r._time)}",
                    source: "reflex",
                    kind: "deadman",
                    cluster: r.cluster,
                    node: r.node,
                    last_report: r._time,
                },
            ),
        config: {insecureSkipVerify: false, timeout: webhook_timeout},
    )

from(bucket: telemetry_bucket)
    |> range(start: -lookback)
    |> filter(fn: (r) => r._measurement == "reflex_collector" and r._field == "success")
    |> group(columns: ["cluster", "node"])
    |> last()
    |> filter(fn: (r) => r._time >= silent_after and r._time < silent_before)
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
