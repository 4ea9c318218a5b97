// Which ports' symbol errors grow fastest?
// Growth of every InfiniBand/RoCE port's symbol_error counter over the period (counter
// resets are not growth), with the rate per hour, fastest first.

// Parameters: edit these lines.
telemetry_bucket = "telemetry"
cluster = "c1"
start = -24h
top_n = 20

from(bucket: telemetry_bucket)
    |> range(start: start)
    |> filter(fn: (r) => r._measurement == "ib_port" and r._field == "symbol_error")
    |> filter(fn: (r) => r.cluster == cluster)
    |> increase()
    |> reduce(
        identity: {growth: 0.0, first: time(v: 0), last: time(v: 0)},
        fn: (r, accumulator) =>
            ({
                growth: float(v: r._value),
                first: if accumulator.first == time(v: 0) then r._time else accumulator.first,
                last: r._time,
            }),
    )
    |> group()
    |> map(
        fn: (r) => {
            hours = float(v: int(v: r.last) - int(v: r.first)) / 3600000000000.0

            return {
                node: r.node,
                hca: r.hca,
                port: r.port,
                growth: r.growth,
                per_hour: if hours > 0.0 then r.growth / hours else 0.0,
            }
        },
    )
    |> sort(columns: ["growth"], desc: true)
    |> limit(n: top_n)
