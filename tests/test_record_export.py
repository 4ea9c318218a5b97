"""``reflex_record`` (flows/judge/shard_step.py: record_points): each part's record across jobs,
and each GPU's clock in the last job it served, the number a drift against that job quotes,
written to a real InfluxDB and read back as an SRE's Flux would."""

from __future__ import annotations

from pathlib import Path

from conftest import ALL_TIME, query_rows
from memory_family_runs import run_memory_family

from reflex_localize.flows.incidents.node_memory import NodeMemory
from reflex_localize.flows.judge.shard_step import record_points
from reflex_localize.influx.local_server import InfluxServer
from reflex_localize.influx.writer import Writer
from reflex_localize.schemas.codec import validate

NOW_NS = 1_767_225_600 * 10**9


def _points() -> list:
    memory = NodeMemory()
    memory.note_xid("n1|gpu|3", 79, "critical", NOW_NS)
    clocks = {"n1|gpu|3": (1901.5, "a"), "n1|gpu|0": (1950.0, "a")}
    return record_points(memory, "c1", NOW_NS, clocks)


def test_a_gpu_with_a_last_jobs_clock_is_exported_with_or_without_trouble() -> None:
    by_gpu = {p.tags["index"]: dict(p.fields) for p in map(validate, _points())}
    assert by_gpu["0"] == {
        "trouble": 0.0,
        "reasons": "",
        "xids": "",
        "last_job_clock_mhz": 1950.0,
        "last_job": "a",
    }
    assert by_gpu["3"]["trouble"] == 4.0 and by_gpu["3"]["xids"] == "79x1"
    assert by_gpu["3"]["last_job_clock_mhz"] == 1901.5


def test_a_record_without_a_clock_carries_no_clock_fields() -> None:
    memory = NodeMemory()
    memory.note("n2|nic|mlx5_0/1", 0.2, NOW_NS, "symbol_error_rate")
    [point] = record_points(memory, "c1", NOW_NS)
    assert set(point.fields) == {"trouble", "reasons", "xids"}


def test_the_record_reads_back_from_influxdb(
    influx: InfluxServer, influx_bucket: str, tmp_path: Path
) -> None:
    with Writer(
        influx.url, influx.token, influx.org, influx_bucket, tmp_path / "spool", timeout_s=30.0
    ) as writer:
        writer.write(_points())
        assert writer.flush()
    assert writer.stats.rejected == 0, writer.stats.rejected_by_reason
    rows = query_rows(
        influx,
        f'from(bucket: "{influx_bucket}") |> {ALL_TIME} '
        '|> filter(fn: (r) => r._measurement == "reflex_record" and r._field == '
        '"last_job_clock_mhz")',
    )
    assert sorted((r["node"], r["index"], r["_value"]) for r in rows) == [
        ("n1", "0", 1950.0),
        ("n1", "3", 1901.5),
    ]


def test_the_flow_exports_the_clock_a_carried_drift_is_measured_from() -> None:
    exported: dict[str, tuple[float, str]] = {}

    def keep(route: str, item: object) -> None:
        for point in item if route == "points" else []:  # type: ignore[attr-defined]
            if point.measurement == "reflex_record" and "last_job" in point.fields:
                entity = "|".join(point.tags[k] for k in ("node", "component", "index"))
                exported[entity] = (point.fields["last_job_clock_mhz"], point.fields["last_job"])

    events, _ = run_memory_family("reflex", "gpu_drift_from", on_output=keep)
    [drift] = [e for e in events if e.trigger == "drift"]
    clock, job = exported[drift.top.entity]
    assert job == "a" and clock > 1800.0
    assert "what it held in job a" in drift.summary
