// Notifies an HTTP endpoint of every Reflex localization event at or above a severity.
// One event id gives one notification: scheduled runs read back-to-back windows of `every`
// (the offset leaves 30 s for late writes), and a failed delivery fails the run, which
// InfluxDB lists under the task's failed runs.
import "http/requests"
import "json"
import "influxdata/influxdb/secrets"

option task = {name: "reflex-localization-event", every: 1m, offset: 30s}

// Parameters: `reflex alerts install` rewrites these lines.
results_bucket = "reflex"
min_severity = 2
payload_format = "slack"
webhook_timeout = 10s

webhook_url = secrets.get(key: "reflex_alert_webhook_url")
severity_name = (s) => if s >= 3 then "critical" else if s == 2 then "warning" else "info"
text = (r) =>
    "[Reflex ${severity_name(s: r.severity)}] ${r.cluster}/${r.job}: ${r.summary} "
        + "(suspect ${r.suspect_node} ${r.suspect_component} ${r.suspect_index}, "
        + "action: ${r.action})"
slack = (r) =>
    json.encode(
        v: {
            text: text(r: r),
            source: "reflex",
            kind: "localization_event",
            event_id: r.event_id,
            severity: r.severity,
            confidence: r.confidence,
            cluster: r.cluster,
            job: r.job,
            trigger: r.trigger,
            suspect_node: r.suspect_node,
            suspect_component: r.suspect_component,
            suspect_index: r.suspect_index,
            action: r.action,
            summary: r.summary,
        },
    )
pagerduty = (r) =>
    json.encode(
        v: {
            routing_key: secrets.get(key: "reflex_pagerduty_routing_key"),
            event_action: "trigger",
            dedup_key: r.event_id,
            payload: {
                summary: text(r: r),
                source: r.suspect_node,
                severity: severity_name(s: r.severity),
                component: r.suspect_component,
                group: r.cluster,
                class: r.trigger,
                custom_details: {job: r.job, action: r.action, confidence: r.confidence},
            },
        },
    )
post = (body) =>
    requests.post(
        url: webhook_url,
        headers: ["Content-Type": "application/json"],
        body: body,
        config: {insecureSkipVerify: false, timeout: webhook_timeout},
    )

from(bucket: results_bucket)
    |> range(start: -task.every)
    |> filter(fn: (r) => r._measurement == "reflex_event")
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
    |> unique(column: "event_id")
    |> map(
        fn: (r) => {
            response = post(body: if payload_format == "pagerduty" then pagerduty(r: r) else slack(r: r))

            return
                if response.statusCode < 300 then
                    {_time: r._time, event_id: r.event_id, status: response.statusCode}
                else
                    die(msg: "webhook answered HTTP ${string(v: response.statusCode)}")
        },
    )
