"""The simulator's "demo" scenario and the real flow's outputs on it, loaded into InfluxDB.

Telemetry is the simulator's line protocol (simulator/), thinned in time; scores,
baselines and localization events come from running the real localization flow in process on
the same scenario and seed (flows/runner.py), so the dashboards are checked on what
production would show.
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboards_testdata import TestOrg
from influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS

from reflex_localize.flows.runner import run_in_process
from reflex_localize.schemas.codec import FieldValue, Point, encode
from reflex_localize.schemas.frame import Frame
from reflex_localize.shell.simulated_source import SimulatorSource
from reflex_localize.simulator import Simulation, load_scenario

SCENARIO, SEED, WINDOW_S = "demo", 7, 10.0
BATCH_LINES = 5000
# Seconds between kept samples of the 1 s periodic measurements. The dashboards see every
# series and every event, at a resolution this shared two-core machine can load and query
# in a test run (the full scenario is about 670k lines).
STRIDE_S = {"gpu": 5, "host": 5, "gpu_nvlink": 60, "ib_port": 10, "nic": 10}


@dataclass(frozen=True)
class DemoLoad:
    start_ns: int
    stop_ns: int
    cluster: str
    critical_job: str
    critical_node: str
    telemetry_lines: int
    result_points: int


def thinned(frame: Frame) -> Frame:
    stride = STRIDE_S.get(frame.measurement)
    if stride is None:
        return frame
    return frame.take((frame.time_ns // 1_000_000_000) % stride == 0)


def _write(org: TestOrg, bucket: str, lines: list[str]) -> None:
    with InfluxDBClient(
        org.server.url, org.server.token, org=org.name, timeout=120_000, enable_gzip=True
    ) as client:
        writer = client.write_api(write_options=SYNCHRONOUS)
        for first in range(0, len(lines), BATCH_LINES):
            writer.write(bucket, org.name, lines[first : first + BATCH_LINES])


def _flow_points(cluster: str) -> tuple[list[Point], list[Point]]:
    """(scores and baselines, localization events) of the real flow on the scenario."""
    points: list[Point] = []

    def collect(route: str, item: object) -> None:
        if route == "points":
            points.extend(item)  # type: ignore[arg-type]

    run = run_in_process(
        SimulatorSource(SCENARIO, SEED, 1, WINDOW_S), cluster=cluster, on_output=collect
    )
    return points, [event.to_point() for event in run.events]


def _agent_heartbeats(simulation: Simulation) -> list[str]:
    lines = []
    stop_ns = simulation.start_ns + int(simulation.duration_s * 1e9)
    for node in simulation.cluster.nodes:
        for time_ns in range(simulation.start_ns, stop_ns, 30 * 10**9):
            tags = {"cluster": simulation.cluster.name, "node": node.name, "collector": "host"}
            fields: dict[str, FieldValue] = {
                "duration_seconds": 0.002,
                "success": True,
                "points": 4,
                "errors": 0,
                "clock_offset_seconds": 0.003,
            }
            lines.append(encode(Point("reflex_collector", tags, fields, time_ns)))
    return lines


def load_demo(org: TestOrg) -> DemoLoad:
    simulation = Simulation(load_scenario(SCENARIO), seed=SEED)
    cluster = simulation.cluster.name
    total = 0
    for frames in simulation.chunks(60.0):
        lines = [line for frame in frames for line in thinned(frame).lines()]
        _write(org, "telemetry", lines)
        total += len(lines)
    # The simulator models the hardware, not the agents: their self-metrics (what the node
    # dashboard's agent row shows) are added here, a healthy agent on every node every 30 s.
    heartbeats = _agent_heartbeats(simulation)
    _write(org, "telemetry", heartbeats)
    total += len(heartbeats)
    outputs, events = _flow_points(cluster)
    _write(org, "reflex", [encode(point) for point in outputs + events])
    critical = max(events, key=lambda point: point.fields["severity"])
    return DemoLoad(
        simulation.start_ns,
        simulation.start_ns + int(simulation.duration_s * 1e9),
        cluster,
        critical.tags["job"],
        str(critical.fields["suspect_node"]),
        total,
        len(outputs) + len(events),
    )
