"""The training hook: valid line protocol, rank detection, and never hurting training."""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import pytest

from reflex_localize.collectors.training_hook import (
    TrainingHook,
    detect_rank,
    http_sink,
    with_layout,
)
from reflex_localize.schemas.codec import DecodeReport, Point, decode_lines


def decoded(batches: list[str]) -> list[Point]:
    report = DecodeReport()
    points = list(decode_lines("".join(batches).splitlines(), report))
    assert report.rejected_total == 0, report.examples
    return points


def make_hook(sink: Any, **options: Any) -> TrainingHook:
    return TrainingHook(
        job="llama-70b", rank=13, world_size=64, local_rank=5, tp_size=8, pp_size=4,
        profile="h100-sxm5-80gb", cluster="c1", node="n2", sink=sink, env={},
        flush_interval_s=0.02, **options,
    )  # fmt: skip


def test_steps_membership_and_events_are_valid_line_protocol() -> None:
    batches: list[str] = []
    hook = make_hook(batches.append)
    with hook.compute:
        time.sleep(0.002)
    with hook.comm:
        time.sleep(0.001)
    hook.step(tokens=8192, loss=2.5)
    hook.step(tokens=8192, loss=float("nan"))
    hook.event("nccl_timeout", 'Watchdog caught collective operation timeout: "ALLREDUCE"')
    hook.close()
    points = decoded(batches)
    steps = [p for p in points if p.measurement == "train_step"]
    assert [p.fields["step"] for p in steps] == [1, 2]
    assert steps[0].tags == {"cluster": "c1", "job": "llama-70b", "node": "n2", "rank": "13"}
    compute, comm = steps[0].fields["compute_seconds"], steps[0].fields["comm_seconds"]
    assert isinstance(compute, float) and compute >= 0.002
    assert isinstance(comm, float) and comm >= 0.001
    assert "compute_seconds" not in steps[1].fields, "phases reset at each step"
    assert "loss" not in steps[1].fields, "NaN is dropped here, not by the client"
    memberships = [p for p in points if p.measurement == "job_membership"]
    assert memberships[0].fields == {
        "world_size": 64, "active": True, "dp_rank": 1, "pp_rank": 0, "tp_rank": 5,
        "pp_size": 4, "gpu": 5, "profile": "h100-sxm5-80gb",
    }  # fmt: skip
    assert memberships[-1].fields["active"] is False
    (event,) = [p for p in points if p.measurement == "event"]
    assert event.tags["source"] == "training" and event.fields["rank"] == 13


def test_megatron_layout() -> None:
    # 2 stages x 2 data-parallel x 4 tensor-parallel: rank 13 = stage 1, dp 1, tp 1
    info = with_layout(13, 16, None, "j", tp_size=4, pp_size=2)
    assert (info.pp_rank, info.dp_rank, info.tp_rank) == (1, 1, 1)
    assert with_layout(3, 10, None, "j", tp_size=4, pp_size=1).dp_rank is None  # not divisible


def test_rank_from_torchrun_and_slurm_environments() -> None:
    torchrun = detect_rank({"RANK": "7", "WORLD_SIZE": "16", "LOCAL_RANK": "7"}, "j")
    assert (torchrun.rank, torchrun.world_size, torchrun.local_rank) == (7, 16, 7)
    slurm = detect_rank(
        {"SLURM_PROCID": "9", "SLURM_NTASKS": "32", "SLURM_LOCALID": "1", "SLURM_JOB_ID": "4242"}
    )
    assert (slurm.rank, slurm.world_size, slurm.local_rank, slurm.job) == (9, 32, 1, "4242")


def test_a_failing_sink_never_raises_and_bounds_the_retry_buffer() -> None:
    def down(batch: str) -> None:
        raise ConnectionRefusedError("InfluxDB is down")

    hook = make_hook(down, max_retry_lines=5)
    for _ in range(20):
        hook.step(tokens=1)
    hook.close()
    assert hook.stats.send_errors >= 1
    assert hook.stats.dropped_send_failed >= 20 + 1 - 5


def test_a_full_queue_drops_and_counts() -> None:
    release = threading.Event()

    def stuck(batch: str) -> None:
        release.wait(5)

    hook = make_hook(stuck, max_queue=10)
    time.sleep(0.05)  # the background thread is now stuck in the sink
    for _ in range(100):
        hook.step()
    assert hook.stats.dropped_queue_full >= 80
    release.set()
    hook.close()


def test_a_slow_sink_does_not_slow_the_training_thread() -> None:
    def slow(batch: str) -> None:
        time.sleep(0.5)

    hook = make_hook(slow)
    costs = []
    for _ in range(2000):
        started = time.perf_counter()
        hook.step(tokens=4096)
        costs.append(time.perf_counter() - started)
    hook.close(timeout_s=0.1)
    assert statistics.median(costs) < 50e-6


@pytest.mark.influx
def test_http_sink_writes_to_real_influxdb(influx: Any, influx_bucket: str) -> None:
    sink = http_sink(influx.url, influx.token, influx.org, influx_bucket)
    hook = make_hook(sink)
    for _ in range(3):
        hook.step(tokens=4096)
    hook.close()
    assert hook.stats.send_errors == 0
    rows = influx.query_rows(
        f'from(bucket: "{influx_bucket}") |> range(start: 0) '
        '|> filter(fn: (r) => r._measurement == "train_step" and r._field == "step")'
    )
    assert sorted(row["_value"] for row in rows) == [1, 2, 3]
