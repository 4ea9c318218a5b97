"""Test data for the dashboard, alert and cookbook tests, written to the real InfluxDB.

Each test module gets its own organization (with its own ``telemetry``, ``reflex`` buckets)
so that its data set is exactly what it wrote, whatever other tests put in the session's
server. Points go through ``reflex_localize.schemas.codec.encode``, so they obey the contract.

The data set: cluster ``c1``, four nodes with two GPUs, two NVLinks per GPU and one IB port
each, job ``job-1`` with one rank per GPU. With ``fault=True``, GPU 1 of ``n03`` runs hot and
slow, logs ECC errors and XID 79, its port's symbol errors grow, and Reflex's outputs (scores,
baselines, a severity-3 localization event) point at it. With ``fault=False`` every node is
healthy and the only event is a severity-1 "pipeline imbalance, no hardware fault".
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS

from reflex_localize.influx.local_server import InfluxServer
from reflex_localize.schemas.codec import FieldValue, Point, encode

CLUSTER, JOB = "c1", "job-1"
NODES = ("n01", "n02", "n03", "n04")
GPUS = ("0", "1")
FAULT_NODE, FAULT_GPU = "n03", "1"
STEP_S = 30
SECOND = 1_000_000_000
QUERY_TIMEOUT_MS = 180_000  # generous: this machine's two cores are shared


@dataclass(frozen=True)
class TestOrg:
    __test__ = False  # a helper, not a test class

    server: InfluxServer
    name: str
    id: str

    def client(self) -> InfluxDBClient:
        return InfluxDBClient(
            self.server.url, self.server.token, org=self.name, timeout=QUERY_TIMEOUT_MS
        )

    def write(self, bucket: str, points: Iterable[Point]) -> int:
        lines = [encode(point) for point in points]
        with self.client() as client:
            client.write_api(write_options=SYNCHRONOUS).write(bucket, self.name, lines)
        return len(lines)

    def query(self, flux: str) -> list:
        with self.client() as client:
            return list(client.query_api().query(flux))


@contextlib.contextmanager
def temporary_org(server: InfluxServer) -> Iterator[TestOrg]:
    """A new organization with empty ``telemetry`` and ``reflex`` buckets; deleted after."""
    name = f"dash-{uuid.uuid4().hex[:10]}"
    with InfluxDBClient(server.url, server.token, timeout=QUERY_TIMEOUT_MS) as client:
        org = client.organizations_api().create_organization(name=name)
        for bucket in ("telemetry", "reflex"):
            client.buckets_api().create_bucket(bucket_name=bucket, org=org)
    try:
        yield TestOrg(server, name, org.id)
    finally:
        if server.running:
            with InfluxDBClient(server.url, server.token, timeout=QUERY_TIMEOUT_MS) as client:
                client.organizations_api().delete_organization(org.id)


def _times(now_ns: int, minutes: int) -> list[int]:
    start = now_ns - minutes * 60 * SECOND
    return list(range(start, now_ns, STEP_S * SECOND))


def _faulty(node: str, gpu: str, fault: bool) -> bool:
    return fault and node == FAULT_NODE and gpu == FAULT_GPU


def telemetry(now_ns: int, *, fault: bool, minutes: int = 30) -> Iterator[Point]:
    """GPU, NVLink, host, IB, train step, membership, collector and event points."""
    times = _times(now_ns, minutes)
    for rank, (node, gpu) in enumerate((n, g) for n in NODES for g in GPUS):
        yield from _gpu(node, gpu, times, fault)
        yield from _steps(node, gpu, rank, times, fault)
    for node in NODES:
        yield from _host_and_port(node, times, fault and node == FAULT_NODE)
    yield from _events(times, fault)


def _gpu(node: str, gpu: str, times: list[int], fault: bool) -> Iterator[Point]:
    bad = _faulty(node, gpu, fault)
    tags = {"cluster": CLUSTER, "node": node, "gpu": gpu, "profile": "h100-sxm5-80gb"}
    for i, t in enumerate(times):
        wobble = (i % 5) * 0.4 + NODES.index(node)
        yield Point(
            "gpu",
            tags,
            {
                "utilization_gpu_ratio": 0.95 - (0.2 if bad else 0.0),
                "memory_used_bytes": 60_000_000_000 + i,
                "sm_clock_mhz": 1500 if bad else 1980,
                "power_watts": 640.0 - (120.0 if bad else 0.0) + wobble,
                "temperature_celsius": 66.0 + wobble + (i * 0.3 if bad else 0.0),
                "memory_temperature_celsius": 70.0 + wobble,
                "clocks_event_reasons": 0x40 if bad and i > 20 else 0,
                "ecc_corrected_volatile": (i * 3 if bad else i // 20),
                "ecc_uncorrected_volatile": (i // 10 if bad else 0),
                "remapped_rows_correctable": 2 if bad else 0,
                "remapped_rows_uncorrectable": 1 if bad and i > 40 else 0,
                "remapped_rows_pending": bad and i > 40,
                "remapped_rows_failure": False,
                "pcie_link_gen": 5,
                "pcie_link_gen_max": 5,
                "pcie_link_width": 8 if bad else 16,
                "pcie_link_width_max": 16,
                "pcie_replay_errors": i * 2 if bad else 0,
                "nvlink_active_links": 18,
            },
            t,
        )
        for link in ("0", "1"):
            yield Point(
                "gpu_nvlink",
                {"cluster": CLUSTER, "node": node, "gpu": gpu, "link": link},
                {
                    "active": True,
                    "crc_flit_errors": i * 5 if bad else 0,
                    "crc_data_errors": i if bad else 0,
                    "replay_errors": i // 3 if bad else 0,
                    "recovery_errors": 0,
                },
                t,
            )


def _steps(node: str, gpu: str, rank: int, times: list[int], fault: bool) -> Iterator[Point]:
    slow = 1.3 if _faulty(node, gpu, fault) else 1.0
    for i, t in enumerate(times):
        tags = {"cluster": CLUSTER, "job": JOB, "node": node, "rank": str(rank)}
        step_time = 2.0 * slow + 0.01 * (rank % 3)
        yield Point(
            "train_step",
            tags,
            {
                "step": i,
                "step_time_seconds": step_time,
                "compute_seconds": 1.5 * slow,
                "comm_seconds": step_time - 1.5 * slow,
                "tokens_per_second": 8192 / step_time,
                "loss": 3.0 - i * 0.01,
            },
            t,
        )
        if i == 0:
            membership: dict[str, FieldValue] = {
                "gpu": int(gpu),
                "world_size": len(NODES) * len(GPUS),
                "dp_rank": rank // 2,
                "pp_rank": rank % 2,
                "tp_rank": 0,
                "pp_size": 2,
                "profile": "h100-sxm5-80gb",
                "active": True,
            }
            yield Point("job_membership", tags, membership, t)


def _host_and_port(node: str, times: list[int], bad: bool) -> Iterator[Point]:
    where = {"cluster": CLUSTER, "node": node}
    port = {**where, "hca": "mlx5_0", "port": "1", "link_layer": "InfiniBand"}
    for i, t in enumerate(times):
        yield Point(
            "host",
            where,
            {
                "cpu_busy_ratio": 0.4 + (i % 3) * 0.01,
                "memory_total_bytes": 2_000_000_000_000,
                "memory_available_bytes": 1_500_000_000_000 - i * 1000,
                "load1": 12.0,
                "psi_memory_some_avg10_ratio": 0.01,
                "psi_io_some_avg10_ratio": 0.02,
            },
            t,
        )
        yield Point(
            "ib_port",
            port,
            {
                "state": 4,
                "phys_state": 5,
                "rate_gbps": 400.0,
                "symbol_error": i * 7 if bad else 1,
                "link_error_recovery": i // 15 if bad else 0,
                "link_downed": 0,
                "port_rcv_errors": i if bad else 0,
                "port_xmit_discards": 0,
                "port_xmit_wait": i * 1000 * (5 if bad else 1),
                "port_xmit_data_bytes": i * 10_000_000_000,
                "port_rcv_data_bytes": i * 10_000_000_000,
            },
            t,
        )
        collector = {**where, "collector": "host"}
        fields: dict[str, FieldValue] = {
            "duration_seconds": 0.01,
            "success": True,
            "points": 40,
            "errors": 0,
            "clock_offset_seconds": 0.004,
        }
        yield Point("reflex_collector", collector, fields, t)


def _events(times: list[int], fault: bool) -> Iterator[Point]:
    mid = times[len(times) // 2]
    where = {"cluster": CLUSTER, "node": "n01", "source": "nvml", "kind": "xid"}
    yield Point("event", where, {"code": 13, "gpu": 0, "message": "Graphics exception"}, mid)
    if fault:
        bad = {**where, "node": FAULT_NODE}
        fields: dict[str, FieldValue] = {
            "code": 79,
            "gpu": int(FAULT_GPU),
            "message": "GPU has fallen off the bus",
        }
        yield Point("event", bad, fields, times[-3])
        link = {**where, "node": FAULT_NODE, "source": "kernel", "kind": "link_down"}
        yield Point("event", link, {"code": 1, "device": "mlx5_0/1", "message": "down"}, mid)


def results(now_ns: int, *, fault: bool, minutes: int = 30) -> Iterator[Point]:
    """reflex_score, reflex_baseline and reflex_event points a flow would write."""
    times = _times(now_ns, minutes)
    for node in NODES:
        for gpu in GPUS:
            bad = _faulty(node, gpu, fault)
            tags = {"cluster": CLUSTER, "node": node, "component": "gpu", "index": gpu}
            for i, t in enumerate(times):
                score = (0.1 + i * 0.15) if bad else 0.1 + 0.05 * (i % 4)
                signal = "temperature_high" if bad else "power_low"
                evidence = json.dumps({signal: round(score, 2)})
                fields: dict[str, FieldValue] = {
                    "score": score,
                    "top_signal": signal,
                    "evidence": evidence,
                    "job": JOB,
                }
                yield Point("reflex_score", tags, fields, t)
                for name, center in (("temperature_high", 66.0), ("power_low", 640.0)):
                    base = {**tags, "signal": name, "state": "busy"}
                    shift = NODES.index(node) * 0.5
                    stats = {"center": center + shift, "scale": 1.5, "count": 100 + i}
                    yield Point("reflex_baseline", base, stats, t)
            yield from _records(tags, times[-5::4], bad)
    yield from _alarms(times, fault)
    yield from events_at(times[-2], fault=fault)


def _alarms(times: list[int], fault: bool) -> Iterator[Point]:
    """The job's alarm bars and rates as the job step exports them."""
    job = {"cluster": CLUSTER, "job": JOB}
    node_hours = len(NODES) * (times[-1] - times[0]) / 3600e9
    raised = {"all": int(fault), "explicit": int(fault)}
    for t in times[::10]:
        for trigger, count in raised.items():
            rate = {"events": count, "node_hours": node_hours,
                    "rate_per_1k_node_hours": 1000 * count / node_hours}  # fmt: skip
            yield Point("reflex_alarm_rate", {**job, "trigger": trigger}, rate, t)
        bar = {"bar": 3.0, "prior": 3.0, "samples": 1000.0}
        yield Point("reflex_alarm_bar", {**job, "statistic": "score|gpu"}, bar, t)


def _records(tags: dict[str, str], times: list[int], bad: bool) -> Iterator[Point]:
    """``reflex_record`` points, as the flow exports them every few windows: the faulty GPU
    came with XID 79 from an earlier job; every GPU has its clock from that job."""
    for t in times:
        fields: dict[str, FieldValue] = {
            "trouble": 4.2 if bad else 0.0,
            "reasons": "xid 79 x1, temperature_high x12" if bad else "",
            "xids": "79x1" if bad else "",
            "last_job_clock_mhz": 1650.0 if bad else 1980.0,
            "last_job": "job-0",
        }
        yield Point("reflex_record", tags, fields, t)


def events_at(time_ns: int, *, fault: bool, event_id: str = "evt-0001") -> Iterator[Point]:
    """One localization event: critical on the faulty GPU, or benign pipeline imbalance."""
    tags = {"cluster": CLUSTER, "job": JOB, "trigger": "step_regression"}
    if fault:
        fields: dict[str, FieldValue] = {
            "event_id": event_id,
            "severity": 3,
            "confidence": 0.9,
            "suspect_node": FAULT_NODE,
            "suspect_component": "gpu",
            "suspect_index": FAULT_GPU,
            "action": "drain node; reseat or replace the GPU",
            "summary": f"GPU {FAULT_GPU} of {FAULT_NODE} fell off the bus after overheating",
            "suspects": '[{"node": "n03", "component": "gpu", "index": "1", "score": 9.1}]',
        }
    else:
        fields = {
            "event_id": event_id,
            "severity": 1,
            "confidence": 0.7,
            "suspect_node": "",
            "suspect_component": "none",
            "suspect_index": "",
            "action": "no hardware fault: pipeline imbalance",
            "summary": "The last pipeline stage is slower than the others",
            "suspects": "[]",
        }
    yield Point("reflex_event", tags, fields, time_ns)
