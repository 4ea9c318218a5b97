"""The agent: scheduling, self-metrics, isolation of broken collectors, the CLI, end to end."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reflex_localize.collectors.agent import Agent
from reflex_localize.collectors.base import Collector, FixedClock, HardwareAbsent
from reflex_localize.collectors.gpu import GpuCollector
from reflex_localize.collectors.host import HostCollector
from reflex_localize.collectors.kmsg import KmsgCollector
from reflex_localize.collectors.nic import NicCollector
from reflex_localize.collectors.nvml_fake import FakeNvml
from reflex_localize.collectors.sinks import WriterSink
from reflex_localize.schemas.codec import DecodeReport, Point, decode_lines
from reflex_localize.shell.collect import command

FIXTURES = Path(__file__).parent / "fixtures"
T0 = 1_700_000_000_000_000_000


class Counting:
    def __init__(self, name: str, interval_s: float) -> None:
        self.name, self.interval_s, self.runs = name, interval_s, 0

    def collect(self, now_ns: int) -> Iterator[Point]:
        self.runs += 1
        yield Point("host", {"cluster": "c1", "node": "n1"}, {"load1": 1.0}, now_ns)


class Broken:
    name, interval_s = "broken", 1.0

    def collect(self, now_ns: int) -> Iterator[Point]:
        yield Point("host", {"cluster": "c1", "node": "n1"}, {"load1": 1.0}, now_ns)
        raise OSError("sysfs went away")


class Absent:
    name, interval_s = "absent", 1.0

    def collect(self, now_ns: int) -> Iterator[Point]:
        raise HardwareAbsent("no such hardware")


class BadPoints:
    name, interval_s = "bad", 1.0

    def collect(self, now_ns: int) -> Iterator[Point]:
        yield Point("host", {"cluster": "c1", "node": "n1"}, {"load1": float("nan")}, now_ns)
        yield Point("host", {"cluster": "c1", "node": "n1"}, {"made_up": 1}, now_ns)
        yield Point("host", {"cluster": "c1", "node": "n1"}, {"load1": 2.0}, now_ns)


def self_metrics(points: list[Point]) -> dict[str, dict[str, Any]]:
    return {
        p.tags["collector"]: dict(p.fields) for p in points if p.measurement == "reflex_collector"
    }


def test_a_broken_collector_does_not_stop_the_others() -> None:
    good = Counting("good", 1.0)
    agent = Agent([Broken(), good, Absent()], lambda p: None, cluster="c1", node="n1")
    metrics = self_metrics(agent.run_once())
    assert metrics["broken"]["success"] is False and metrics["broken"]["points"] == 0
    assert metrics["good"]["success"] is True and good.runs == 1
    assert metrics["absent"] == {
        "duration_seconds": metrics["absent"]["duration_seconds"],
        "cpu_seconds": metrics["absent"]["cpu_seconds"],
        "success": True,
        "points": 0,
        "errors": 0,
        "version": agent.version,
    }
    assert agent.version not in ("", "unknown"), "the installed package's version"


def test_points_breaking_the_schema_are_dropped_and_counted() -> None:
    agent = Agent([BadPoints()], lambda p: None, cluster="c1", node="n1")
    points = agent.run_once()
    assert [p.fields for p in points if p.measurement == "host"] == [{"load1": 2.0}]
    assert self_metrics(points)["bad"]["errors"] == 2
    assert self_metrics(agent.run_once())["bad"]["errors"] == 4, "a counter since start"


def test_each_collector_runs_at_its_own_interval() -> None:
    clock = FixedClock(T0)
    fast, slow = Counting("fast", 1.0), Counting("slow", 5.0)
    agent = Agent([fast, slow], lambda p: None, cluster="c1", node="n1", clock=clock)
    for _ in range(10):
        wait = agent.tick()
        assert wait == pytest.approx(1.0)
        clock.advance(wait)
    assert (fast.runs, slow.runs) == (10, 2)


def test_a_late_agent_skips_rather_than_bursts() -> None:
    clock = FixedClock(T0)
    fast = Counting("fast", 1.0)
    agent = Agent([fast], lambda p: None, cluster="c1", node="n1", clock=clock)
    agent.tick()
    clock.advance(30.0)  # the VM was suspended
    agent.tick()
    agent.tick()
    assert fast.runs == 2


def test_a_failing_sink_is_counted_not_raised() -> None:
    def sink(points: list[Point]) -> None:
        raise ConnectionError("down")

    agent = Agent([Counting("c", 1.0)], sink, cluster="c1", node="n1")
    agent.run_once()
    assert agent.emit_failures == 1


def test_run_starts_and_stops_the_xid_thread() -> None:
    nvml = FakeNvml.h100_node(gpus=2)
    received: list[Point] = []
    agent = Agent(
        [GpuCollector("c1", "n1", nvml=nvml, interval_s=0.05)],
        received.extend,
        cluster="c1",
        node="n1",
    )
    stop = threading.Event()
    thread = threading.Thread(target=agent.run, args=(stop,))
    thread.start()
    try:
        nvml.push_xid(1, 48)
        for _ in range(100):
            if any(p.measurement == "event" for p in received):
                break
            stop.wait(0.05)
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert [p.fields["code"] for p in received if p.measurement == "event"] == [48]


def write_config(tmp_path: Path, extra: str = "") -> Path:
    config = tmp_path / "collect.toml"
    config.write_text(
        f"""
[identity]
cluster = "fixture"
node = "fixture-node"

[collect]
enabled = ["host", "host_fs", "nic", "kmsg", "gpu"]
proc_root = "{FIXTURES / "host" / "proc"}"
sys_root = "{FIXTURES / "nic" / "sys"}"
kmsg_path = "{FIXTURES / "kmsg" / "kmsg.txt"}"
spool_dir = "{tmp_path / "spool"}"
hook_socket = "{tmp_path / "hook.sock"}"
{extra}
"""
    )
    return config


def decoded(text: str) -> list[Point]:
    report = DecodeReport()
    points = list(decode_lines(text.splitlines(), report))
    assert report.rejected_total == 0, report.examples
    return points


def test_cli_once_stdout_on_fixture_trees(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        command, ["--config", str(write_config(tmp_path)), "--once", "--stdout"]
    )
    assert result.exit_code == 0, result.output
    points = decoded(result.stdout)
    measurements = {p.measurement for p in points}
    assert {"host", "host_disk", "nic", "ib_port", "event", "reflex_collector"} <= measurements
    assert {p.tags["node"] for p in points} == {"fixture-node"}


def test_cli_once_stdout_on_this_machine() -> None:
    result = CliRunner().invoke(command, ["--once", "--stdout"], env={"REFLEX_CLUSTER": "here"})
    assert result.exit_code == 0, result.output
    points = decoded(result.stdout)
    assert {"host", "nic", "reflex_collector"} <= {p.measurement for p in points}
    assert all(p.fields["success"] for p in points if p.measurement == "reflex_collector")


def test_cli_once_fails_when_every_source_path_is_wrong(tmp_path: Path) -> None:
    wrong = tmp_path / "nowhere"
    config = (
        write_config(tmp_path)
        .read_text()
        .replace(
            '"gpu"]',
            '"topology", "hook"]',  # not gpu: on a GPU node it would work
        )
    )
    for key in ("proc_root", "sys_root", "kmsg_path"):
        config = "\n".join(
            f'{key} = "{wrong / key}"' if line.startswith(f"{key} =") else line
            for line in config.splitlines()
        )
    path = tmp_path / "wrong.toml"
    path.write_text(config)
    result = CliRunner().invoke(command, ["--config", str(path), "--once", "--stdout"])
    assert result.exit_code == 1, result.output
    assert "every collector failed" in result.output
    for name in ("host (", "host_fs (", "nic (", "topology ("):
        assert name in result.output
    assert f"proc_root {wrong / 'proc_root'} is not a directory" in result.output
    assert "hardware absent: kmsg, hook" in result.output


def test_cli_once_succeeds_when_hardware_is_only_absent(tmp_path: Path) -> None:
    config = (
        write_config(tmp_path)
        .read_text()
        .replace('["host", "host_fs", "nic", "kmsg", "gpu"]', '["gpu", "hook"]')
    )
    path = tmp_path / "absent.toml"
    path.write_text(config)
    result = CliRunner().invoke(command, ["--config", str(path), "--once", "--stdout"])
    assert result.exit_code == 0, result.output
    metrics = self_metrics(decoded(result.stdout))
    assert set(metrics) == {"gpu", "hook"}
    assert all(m["success"] and m["points"] == 0 for m in metrics.values())


def test_cli_config_errors_name_the_key_and_file(tmp_path: Path) -> None:
    config = write_config(tmp_path, "colour = 'blue'")
    result = CliRunner().invoke(command, ["--config", str(config), "--once", "--stdout"])
    assert result.exit_code != 0
    assert "colour" in result.output and str(config) in result.output


def test_cli_without_influx_url_or_stdout_says_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(command, ["--config", str(write_config(tmp_path)), "--once"])
    assert result.exit_code != 0 and "REFLEX_INFLUX_URL" in result.output


class RecordingWriter:
    def __init__(self) -> None:
        self.points: list[Any] = []
        self.flushes = 0
        self.closed = False

    def write(self, points: Any) -> None:
        self.points.extend(points)

    def flush(self, wait_s: float = 30.0) -> bool:
        self.flushes += 1
        return True

    def close(self, wait_s: float = 30.0) -> bool:
        self.closed = True
        return True


def test_writer_sink_flushes_events_at_once_and_bounds_its_queue() -> None:
    writer = RecordingWriter()
    sink = WriterSink(writer, flush_interval_s=60.0, max_queued_points=3)
    event = Point(
        "event", {"cluster": "c", "node": "n", "source": "nvml", "kind": "xid"}, {"code": 79}, 1
    )
    sink.emit([event])
    for _ in range(100):
        if writer.flushes:
            break
        threading.Event().wait(0.02)
    assert writer.points == [event] and writer.flushes >= 1
    host = Point("host", {"cluster": "c", "node": "n"}, {"load1": 1.0}, 1)
    sink.emit([host] * 4)
    assert sink.dropped == 4
    sink.close()
    assert writer.closed


@pytest.mark.influx
def test_agent_writes_to_real_influxdb(influx: Any, influx_bucket: str, tmp_path: Path) -> None:
    from reflex_localize.influx.writer import Writer

    writer = Writer(influx.url, influx.token, influx.org, influx_bucket, tmp_path / "spool")
    sink = WriterSink(writer, flush_interval_s=0.2)
    collectors: list[Collector] = [
        HostCollector("c1", "n1", proc_root=FIXTURES / "host" / "proc"),
        NicCollector("c1", "n1", sys_root=FIXTURES / "nic" / "sys"),
        KmsgCollector(
            "c1", "n1", path=FIXTURES / "kmsg" / "kmsg.txt", proc_root=FIXTURES / "kmsg" / "proc"
        ),
        GpuCollector("c1", "n1", nvml=FakeNvml.h100_node(gpus=2)),
    ]
    agent = Agent(collectors, sink.emit, cluster="c1", node="n1", clock=FixedClock(T0))
    produced = agent.run_once()
    sink.close()
    assert writer.stats.sent == len(produced) and writer.stats.rejected == 0
    rows = influx.query_rows(
        f'from(bucket: "{influx_bucket}") |> range(start: 0, stop: 2100-01-01T00:00:00Z) '
        '|> filter(fn: (r) => r._field == "points" or r._field == "message" '
        'or r._field == "load1" or r._field == "rx_bytes" or r._field == "symbol_error" '
        'or r._field == "power_watts" or r._field == "active" or r._field == "read_bytes") '
        '|> group(columns: ["_measurement"]) |> count()'
    )
    stored = {row["_measurement"]: row["_value"] for row in rows}
    assert stored == {
        "host": 1,  # one host point (its first run has no CPU ratios, load1 is there)
        "host_disk": 1,
        "nic": 4,  # eth0, ens1f0np0, ib0, ib1 (lo is ignored)
        "ib_port": 3,
        "event": 10,
        "gpu": 2,
        "gpu_nvlink": 36,
        "reflex_collector": 4,
    }
    xid = influx.query_rows(
        f'from(bucket: "{influx_bucket}") |> range(start: 0, stop: 2100-01-01T00:00:00Z) '
        '|> filter(fn: (r) => r._measurement == "event" and r.kind == "xid" and r._field == "code")'
    )
    assert sorted(row["_value"] for row in xid) == [48, 63, 79]
