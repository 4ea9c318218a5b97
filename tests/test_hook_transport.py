"""The training hook reaches its node's agent without a host mount: over TCP at the node's
address (a pod with ``status.hostIP``), checked as the socket's records are; on the socket the
kernel names each sender, and a job belongs to the user that first sent for it (or the Slurm
job its cgroup names). The job comes from the scheduler, never a shared ``none``; records sent
before the agent starts wait in the hook's retry buffer, membership first."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from reflex_localize.collectors.hook_receiver import NOT_THE_SENDERS_JOB, HookReceiver
from reflex_localize.collectors.hook_socket import FRAME, HEADER, SocketSink, TcpSink
from reflex_localize.collectors.training_hook import TrainingHook, job_id, sink_from_env
from reflex_localize.schemas.codec import Point

REPO = Path(__file__).resolve().parents[1]
STEP = "train_step,cluster=x,job={job},node=elsewhere,rank=0 step=1i 1700000000000000000"


def started(tmp: Path, **kw: object) -> HookReceiver:
    receiver = HookReceiver("c1", "n1", path=str(tmp / "hook.sock"), **kw)  # type: ignore[arg-type]
    receiver.start_background(lambda points: None)
    return receiver


def drained(receiver: HookReceiver, lines: int) -> list[Point]:
    assert receiver.wait_for(lines), (receiver.received_lines, receiver.parse_errors)
    return list(receiver.collect(0))


def test_tcp_records_are_checked_and_stamped_as_the_sockets(tmp_path: Path) -> None:
    receiver = started(tmp_path, address="127.0.0.1:0")
    try:
        sink = TcpSink(f"127.0.0.1:{receiver.tcp_port}")
        lines = [STEP.format(job="j1"), "bogus", "host,cluster=c,node=n load1=1 1"]
        assert sink.send_lines(lines, 0) == 3
        points = drained(receiver, 3)
        assert [(p.measurement, p.tags["node"], p.tags["cluster"]) for p in points] == [
            ("train_step", "n1", "c1")
        ]
        assert receiver.parse_errors == {
            "malformed: bad_sections": 1,
            "malformed: not a training hook record": 1,
        }
        # Not this protocol: a frame longer than any datagram ends the connection, counted.
        with socket.create_connection(("127.0.0.1", receiver.tcp_port), 2) as raw:
            raw.sendall(FRAME.pack(10**7) + b"x" * 100)
            raw.settimeout(2)
            assert raw.recv(10) == b""  # closed by the agent
        assert receiver.parse_errors["malformed: not a hook datagram"] == 1
        # The sink reconnects after the agent dropped it, and a half-sent frame is discarded.
        sink.close()
        assert sink.send_lines([STEP.format(job="j2")], 0) == 1
        assert [p.tags["job"] for p in drained(receiver, 4)] == ["j2"]
        sink.close()
    finally:
        receiver.stop_background()


def test_a_pod_reaches_the_agent_at_its_node_address(tmp_path: Path) -> None:
    """A process with a pod's environment only (no socket mount, no token, torchrun's default
    run id, the Job's name from the downward API) sends steps and membership over TCP."""
    receiver = started(tmp_path, address="127.0.0.1:0")
    script = (
        "from reflex_localize.collectors.training_hook import TrainingHook\n"
        "hook = TrainingHook(flush_interval_s=0.05)\n"
        "for _ in range(5):\n"
        "    hook.step()\n"
        "hook.close()\n"
        "assert not hook.stats.dropped, hook.stats\n"
    )
    pod_env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(REPO.parent),
        "HOST_IP": "127.0.0.1",  # status.hostIP
        "REFLEX_HOOK_ADDRESS": f"127.0.0.1:{receiver.tcp_port}",  # "$(HOST_IP):9103"
        "REFLEX_JOB": "llama-70b-pretrain",  # metadata.labels['batch.kubernetes.io/job-name']
        "TORCHELASTIC_RUN_ID": "none",
        "RANK": "3",
        "WORLD_SIZE": "8",
    }
    try:
        subprocess.run([sys.executable, "-c", script], env=pod_env, check=True, timeout=60)
        points = drained(receiver, 7)  # 5 steps, membership on and off
        assert {p.tags["job"] for p in points} == {"llama-70b-pretrain"}
        assert points[0].measurement == "job_membership"
        assert sum(p.measurement == "train_step" for p in points) == 5
        assert not receiver.parse_errors
    finally:
        receiver.stop_background()


def test_the_socket_names_its_sender_and_a_job_keeps_its_user(tmp_path: Path) -> None:
    receiver = started(tmp_path)
    try:
        assert SocketSink(receiver.path).send_lines([STEP.format(job="j1")], 0) == 1
        assert len(drained(receiver, 1)) == 1
        owner = receiver.owners["j1"]
        assert (owner.pid, owner.uid) == (os.getpid(), os.getuid())
        if os.geteuid() != 0:
            return  # another user's send needs root to become that user; the rule is below
        folder = Path(tempfile.mkdtemp())
        folder.chmod(0o755)
        other = started(folder)
        try:
            SocketSink(other.path).send_lines([STEP.format(job="j1")], 0)
            assert len(drained(other, 1)) == 1
            child = os.fork()
            if child == 0:  # nobody sends for j1 (owned by root) and for its own j9
                os.setgid(65534)
                os.setuid(65534)
                sent = SocketSink(other.path).send_lines(
                    [STEP.format(job="j1"), STEP.format(job="j9")], 0
                )
                os._exit(0 if sent == 2 else 1)
            assert os.waitpid(child, 0)[1] == 0
            assert [p.tags["job"] for p in drained(other, 3)] == ["j9"]
            assert other.parse_errors == {NOT_THE_SENDERS_JOB: 1}
            assert other.owners["j9"].uid == 65534
        finally:
            other.stop_background()
    finally:
        receiver.stop_background()


def test_a_slurm_job_may_send_only_its_own_job(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / str(os.getpid())).mkdir(parents=True)
    (proc / str(os.getpid()) / "cgroup").write_text(
        "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n"
    )
    receiver = started(tmp_path, proc_root=str(proc))
    try:
        sink = SocketSink(receiver.path)
        assert sink.send_lines([STEP.format(job="999"), STEP.format(job="4242")], 0) == 2
        assert [p.tags["job"] for p in drained(receiver, 2)] == ["4242"]
        assert receiver.parse_errors == {NOT_THE_SENDERS_JOB: 1}
    finally:
        receiver.stop_background()


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SLURM_JOB_ID": "4242", "TORCHELASTIC_RUN_ID": "abc"}, "4242"),
        ({"REFLEX_JOB": "train-7", "SLURM_JOB_ID": "4242"}, "train-7"),
        ({"TORCHELASTIC_RUN_ID": "c5f1e"}, "c5f1e"),
        ({"TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "n1", "MASTER_PORT": "29500"},
         "torchrun-n1:29500"),
    ],
)  # fmt: skip
def test_the_job_comes_from_the_scheduler(env: dict[str, str], expected: str) -> None:
    assert job_id(env) == expected


def test_torchruns_default_run_id_is_never_a_shared_job() -> None:
    alone = job_id({"TORCHELASTIC_RUN_ID": "none"})
    assert alone == f"{socket.gethostname()}-{os.getpid()}"
    hook = TrainingHook(rank=0, world_size=1, sink=lambda batch: None, env={})
    hook.close()
    assert hook.info.job not in ("none", "unknown")


def test_records_wait_for_an_agent_that_starts_later(tmp_path: Path) -> None:
    path = tmp_path / "run" / "hook.sock"  # not even its folder yet
    env = {"REFLEX_HOOK_SOCKET": str(path)}
    hook = TrainingHook(job="j1", rank=0, world_size=1, env=env, flush_interval_s=0.02)
    for _ in range(27):
        hook.step()
    deadline = time.monotonic() + 5
    while hook.stats.send_errors < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "FileNotFoundError" in hook.stats.last_send_error and not hook.stats.dropped
    receiver = HookReceiver("c1", "n1", path=str(path))
    receiver.start_background(lambda points: None)
    try:
        points = drained(receiver, 28)
    finally:
        hook.close()
        receiver.stop_background()
    assert points[0].measurement == "job_membership"  # membership as soon as it connects
    assert sum(p.measurement == "train_step" for p in points) == 27
    assert hook.stats.dropped == 0


def test_the_hook_picks_tcp_from_its_environment() -> None:
    sink = sink_from_env({"REFLEX_HOOK_ADDRESS": "10.0.0.7:9103"})
    assert isinstance(sink, TcpSink) and (sink.host, sink.port) == ("10.0.0.7", 9103)
    assert type(sink_from_env({"REFLEX_HOOK_ADDRESS": "nonsense"})) is SocketSink
    assert HEADER.startswith("#reflex-hook")


def test_a_tcp_hook_reconnects_when_its_agent_restarts(tmp_path: Path) -> None:
    """The old connection's end of file is seen before the next send: nothing is sent into it."""
    first = started(tmp_path, address="127.0.0.1:0")
    port = first.tcp_port
    sink = TcpSink(f"127.0.0.1:{port}")
    try:
        assert sink.send_lines([STEP.format(job="j1")], 0) == 1
        assert len(drained(first, 1)) == 1
    finally:
        first.stop_background()
    (tmp_path / "again").mkdir()
    second = started(tmp_path / "again", address=f"127.0.0.1:{port}")
    try:
        time.sleep(0.1)  # the old connection's FIN has arrived
        assert sink.send_lines([STEP.format(job="j2")], 0) == 1
        assert [p.tags["job"] for p in drained(second, 1)] == ["j2"]
    finally:
        sink.close()
        second.stop_background()
