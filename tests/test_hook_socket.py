"""The training hook talks to its node's agent over a real Unix socket: no token in the job,
never blocked, every lost or refused record counted on one side or the other."""

from __future__ import annotations

import socket
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reflex_localize.collectors.agent import Agent
from reflex_localize.collectors.hook_receiver import DROPPED_BY_HOOKS, HookReceiver
from reflex_localize.collectors.hook_socket import HEADER, SocketSink
from reflex_localize.collectors.journal import Journal
from reflex_localize.collectors.sinks import WriterSink
from reflex_localize.collectors.training_hook import HttpSink, TrainingHook, sink_from_env
from reflex_localize.schemas.codec import Point


class RecordingWriter:
    """Stands in for influx.writer.Writer where the test is about the socket, not InfluxDB."""

    def __init__(self) -> None:
        self.points: list[Point] = []

    def write(self, points: Any) -> None:
        self.points.extend(points)

    def flush(self, wait_s: float = 30.0) -> bool:
        return True

    def close(self, wait_s: float = 30.0) -> bool:
        return True


def hook(path: Path, **options: Any) -> TrainingHook:
    """A hook finding the agent as a job would: from REFLEX_HOOK_SOCKET, no sink given."""
    defaults: dict[str, Any] = {"job": "llm", "rank": 3, "world_size": 8, "cluster": "job-side",
                                "node": "container-7f3a", "flush_interval_s": 0.02}  # fmt: skip
    return TrainingHook(env={"REFLEX_HOOK_SOCKET": str(path)}, **{**defaults, **options})


def eventually(check: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)
    return check()


@pytest.fixture
def agent_loop(tmp_path: Path) -> Iterator[tuple[HookReceiver, Agent, RecordingWriter, Path]]:
    """The agent's loop in a thread, as ``reflex collect`` runs it, with its journal."""
    path = tmp_path / "run" / "hook.sock"
    receiver = HookReceiver("c1", "gpu-node-1", path=str(path), interval_s=0.05)
    writer = RecordingWriter()
    sink = WriterSink(writer, flush_interval_s=0.05, journal=Journal(tmp_path / "journal"))
    agent = Agent([receiver], sink.emit, cluster="c1", node="gpu-node-1")
    stop = threading.Event()
    thread = threading.Thread(target=agent.run, args=(stop,))
    thread.start()
    assert eventually(path.exists)
    yield receiver, agent, writer, path
    stop.set()
    thread.join(10)
    sink.close()
    assert not path.exists(), "the agent removes its socket when it stops"


def measurements(points: list[Point], name: str) -> list[Point]:
    return [p for p in points if p.measurement == name]


def test_records_reach_the_writer_stamped_by_the_agent(
    agent_loop: tuple[HookReceiver, Agent, RecordingWriter, Path],
) -> None:
    _, _, writer, path = agent_loop
    training = hook(path)
    for _ in range(5):
        training.step(tokens=4096)
    training.event("nccl_timeout", "watchdog caught collective operation timeout")
    training.close()
    assert training.stats.sent_lines == 8 and training.stats.dropped == 0
    assert eventually(lambda: len(measurements(writer.points, "train_step")) == 5)
    steps = measurements(writer.points, "train_step")
    assert [p.fields["step"] for p in steps] == [1, 2, 3, 4, 5]
    assert steps[0].tags == {"cluster": "c1", "job": "llm", "node": "gpu-node-1", "rank": "3"}
    assert [p.fields["active"] for p in measurements(writer.points, "job_membership")] == [
        True,
        False,
    ]
    (event,) = measurements(writer.points, "event")
    assert event.tags["source"] == "training" and event.tags["node"] == "gpu-node-1"
    metric = measurements(writer.points, "reflex_collector")[-1]
    assert metric.tags["collector"] == "hook" and metric.fields["errors"] == 0
    assert metric.fields["success"] is True and isinstance(metric.fields["version"], str)


def test_malformed_records_are_counted_by_reason(
    agent_loop: tuple[HookReceiver, Agent, RecordingWriter, Path],
) -> None:
    receiver, _, writer, path = agent_loop
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    good = "train_step,cluster=c,job=j,node=n,rank=0 step=7i 1700000000000000000"
    datagrams = [
        (
            f"{HEADER}0\n{good}\n"
            "train_step,cluster=c,job=j,node=n,rank=0 made_up=1i 1700000000000000000\n"
            "gpu,cluster=c,node=n,gpu=0,profile=p power_watts=1.0 1700000000000000000\n"
            "event,cluster=c,node=n,source=kernel,kind=xid "
            'code=79i,message="x" 1700000000000000000\n'
            "train_step,cluster=c,job=j,node=n,rank=0 step=1.5 1700000000000000000\n"
        ).encode(),
        ("no header\n" + good).encode(),
        b"\xff\xfe not utf-8",
    ]
    for datagram in datagrams:
        sender.sendto(datagram, str(path))
    sender.close()
    expected = {
        "malformed: undeclared_field": 1,
        "malformed: not a training hook record": 2,  # a gpu point, a kernel event
        "malformed: wrong_type": 1,
        "malformed: not a hook datagram": 2,
    }
    assert eventually(lambda: receiver.parse_errors == expected), receiver.parse_errors
    assert eventually(lambda: any(p.fields.get("errors") == 6 for p in writer.points))
    assert [p.fields["step"] for p in measurements(writer.points, "train_step")] == [7]


def test_without_an_agent_the_hook_counts_drops_and_reports_them_later(tmp_path: Path) -> None:
    path = tmp_path / "hook.sock"
    training = hook(path, max_retry_lines=5, flush_interval_s=0.01)
    costs = []
    for _ in range(20):
        started = time.perf_counter()
        training.step()
        costs.append(time.perf_counter() - started)
        time.sleep(0.005)
    assert eventually(lambda: training.stats.dropped >= 16)
    assert "FileNotFoundError" in training.stats.last_send_error
    assert statistics.median(costs) < 50e-6, "the training thread never waits for the socket"
    receiver = HookReceiver("c1", "n1", path=str(path))
    receiver.start_background(lambda _: None)
    try:
        training.step()
        reported = lambda: receiver.parse_errors.get(DROPPED_BY_HOOKS)  # noqa: E731
        assert eventually(lambda: reported() == training.stats.dropped >= 16)
        kept: list = []  # the report can be read before the lines behind it (a loaded CI)

        def five_kept() -> bool:
            kept.extend(p for p in receiver.collect(0) if p.measurement == "train_step")
            return len(kept) >= 5

        assert eventually(five_kept), "the retry buffer's lines arrive once the agent is there"
    finally:
        training.close()
        receiver.stop_background()


def test_a_full_socket_never_blocks_the_training_thread(tmp_path: Path) -> None:
    path = tmp_path / "hook.sock"
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # bound, never read: fills up
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.bind(str(path))
    sink = SocketSink(str(path))
    line = "train_step,cluster=c,job=j,node=n,rank=0 step=1i 1700000000000000000"
    refused_at = None
    for attempt in range(10_000):
        if sink.send_lines([line] * 50, 0) < 50:
            refused_at = attempt
            break
    assert refused_at is not None and "BlockingIOError" in sink.last_error
    training = hook(path, max_retry_lines=100)
    costs = []
    for _ in range(2000):
        started = time.perf_counter()
        training.step(tokens=1)
        costs.append(time.perf_counter() - started)
    assert eventually(lambda: training.stats.dropped > 0)
    training.close(timeout_s=1)
    stuck.close()
    assert statistics.median(costs) < 50e-6


class FakeOptimizer:
    """torch.optim.Optimizer's step hooks, as torch 2.x calls them (pre, step, post);
    torch cannot be installed here, and the hook only needs these two methods."""

    def __init__(self) -> None:
        self.pre: dict[int, Callable[..., Any]] = {}
        self.post: dict[int, Callable[..., Any]] = {}

    def register_step_pre_hook(self, hook: Callable[..., Any]) -> Any:
        return self._register(self.pre, hook)

    def register_step_post_hook(self, hook: Callable[..., Any]) -> Any:
        return self._register(self.post, hook)

    def _register(self, hooks: dict[int, Callable[..., Any]], hook: Callable[..., Any]) -> Any:
        key = len(hooks) + len(self.pre) + len(self.post)
        hooks[key] = hook

        class Handle:
            def remove(self) -> None:
                hooks.pop(key, None)

        return Handle()

    def step(self, seconds: float = 0.002) -> None:
        for pre in list(self.pre.values()):
            pre(self, (), {})
        time.sleep(seconds)  # the parameter update
        for post in list(self.post.values()):
            post(self, (), {})


def test_one_line_optimizer_integration_and_named_sections() -> None:
    batches: list[str] = []
    training = TrainingHook(job="j", rank=0, world_size=1, sink=batches.append, env={},
                            flush_interval_s=0.02)  # fmt: skip
    optimizer = FakeOptimizer()
    handles = training.attach(optimizer, tokens_per_step=2048)
    forward, backward = training.section("forward"), training.section("backward")
    for step in range(3):
        with training.section("data"):
            time.sleep(0.001)
        with forward:
            time.sleep(0.002)
        with backward:
            time.sleep(0.003)
        if step == 2:
            with training.section("checkpoint"):
                time.sleep(0.004)
        optimizer.step()
    for handle in handles:
        handle.remove()
    optimizer.step()  # detached: no step
    training.close()
    lines = [line for batch in batches for line in batch.splitlines()]
    steps = [line for line in lines if line.startswith("train_step")]
    assert len(steps) == 3
    fields = dict(pair.split("=") for pair in steps[2].split(" ")[1].split(","))
    seconds = {k: float(v) for k, v in fields.items() if k.endswith("_seconds")}
    assert seconds["data_seconds"] >= 0.001 and seconds["forward_seconds"] >= 0.002
    assert seconds["backward_seconds"] >= 0.003 and seconds["checkpoint_seconds"] >= 0.004
    assert seconds["optimizer_seconds"] >= 0.002
    # No compute phase marked: compute is forward + backward + optimizer.
    assert seconds["compute_seconds"] == pytest.approx(
        seconds["forward_seconds"] + seconds["backward_seconds"] + seconds["optimizer_seconds"]
    )
    assert "checkpoint_seconds" not in steps[0] and "tokens_per_second" in steps[0]


def test_an_unknown_section_or_optimizer_never_raises() -> None:
    batches: list[str] = []
    training = TrainingHook(job="j", rank=0, world_size=1, sink=batches.append, env={})
    with training.section("forwrad"):
        pass
    assert training.attach(object()) == []
    training.step()
    training.close()
    assert "forwrad" not in "".join(batches)


def test_the_agent_socket_is_the_default_and_influx_an_opt_in() -> None:
    default = sink_from_env({})
    assert isinstance(default, SocketSink) and default.path == "/run/reflex/hook.sock"
    chosen = sink_from_env({"REFLEX_HOOK_SOCKET": "/tmp/x.sock"})
    assert isinstance(chosen, SocketSink) and chosen.path == "/tmp/x.sock"
    direct = sink_from_env(
        {"REFLEX_HOOK_SINK": "influx", "REFLEX_INFLUX_URL": "http://db:8086",
         "REFLEX_INFLUX_TOKEN": "t"}
    )  # fmt: skip
    assert isinstance(direct, HttpSink)


def test_a_socket_the_agent_cannot_bind_fails_every_run_with_the_reason(tmp_path: Path) -> None:
    taken = tmp_path / "hook.sock"
    taken.write_text("not a socket")
    receiver = HookReceiver("c1", "n1", path=str(taken))
    agent = Agent([receiver], lambda _: None, cluster="c1", node="n1")
    receiver.start_background(agent.emit)
    (metric,) = agent.run_once()
    assert metric.fields["success"] is False
    assert "not a socket" in agent.states[0].last_reason
    assert taken.read_text() == "not a socket", "never deletes a file that is not a socket"


@pytest.mark.influx
def test_hook_records_reach_real_influxdb_through_the_agent(
    influx: Any, influx_bucket: str, tmp_path: Path
) -> None:
    from reflex_localize.influx.writer import Writer

    path = tmp_path / "hook.sock"
    writer = Writer(influx.url, influx.token, influx.org, influx_bucket, tmp_path / "spool")
    sink = WriterSink(writer, flush_interval_s=0.1, journal=Journal(tmp_path / "journal"))
    receiver = HookReceiver("c1", "gpu-node-1", path=str(path), interval_s=0.05)
    agent = Agent([receiver], sink.emit, cluster="c1", node="gpu-node-1")
    stop = threading.Event()
    thread = threading.Thread(target=agent.run, args=(stop,))
    thread.start()
    try:
        assert eventually(path.exists)
        training = hook(path)  # no URL, no token: only the socket
        for _ in range(3):
            training.step(tokens=4096)
        training.close()
        assert eventually(lambda: receiver.received_lines >= 5)
    finally:
        stop.set()
        thread.join(10)
        sink.close()
    rows = influx.query_rows(
        f'from(bucket: "{influx_bucket}") |> range(start: 0) '
        '|> filter(fn: (r) => r._measurement == "train_step" and r._field == "step")'
    )
    assert sorted(row["_value"] for row in rows) == [1, 2, 3]
    assert {row["node"] for row in rows} == {"gpu-node-1"}


def test_a_huge_event_message_is_cut_to_fit_one_datagram() -> None:
    batches: list[str] = []
    training = TrainingHook(job="j", rank=0, world_size=1, sink=batches.append, env={})
    training.event("process_exit", "Traceback ...\n" * 20_000)
    training.close()
    (line,) = [line for line in "".join(batches).splitlines() if line.startswith("event")]
    assert 4096 <= len(line.encode()) < 5000
