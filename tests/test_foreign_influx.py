"""Telegraf and dcgm-exporter data stored in a real InfluxDB give the same events through the
polling source (``--source influx``), the push source (``--source influx-push``: its Flux
backfill alone, and a backfill followed by the live replication stream) and the line-protocol
replay of the same lines.

The data is a simulated run written out in the foreign shapes (``tests/foreign_inverse.py``):
dcgm-exporter through Telegraf's ``inputs.prometheus`` metric version 1 (one measurement per
metric) and 2 (measurement ``prometheus``), and Telegraf's ``nvidia_smi`` and ``infiniband``.
Profiling metrics no table lists (``DCGM_FI_PROF_*``) are added to the metric-version-1 run:
counted and ignored, one note each, never refused line by line.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path

import pytest
from foreign_inverse import foreign_replay
from test_flow_influx import write_lines

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.io.influx_source import InfluxSource
from reflex_localize.flows.io.push_source import PushSource
from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.runner import RunResult, run_in_process
from reflex_localize.influx.local_server import InfluxServer, free_port
from reflex_localize.schemas.line_file import line_stamp

pytestmark = [pytest.mark.influx, pytest.mark.slow]
SHARDS = 3
WINDOW_NS = 10 * 10**9
# Two profiling metrics dcgm-exporter sends by default on H100s, in no table.
PROFILING = ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")


def with_profiling(lines: list[str]) -> list[str]:
    """Adds the profiling metrics beside each GPU temperature line (metric version 1)."""
    out = []
    for line in lines:
        out.append(line)
        if line.startswith("DCGM_FI_DEV_GPU_TEMP,"):
            head, _, stamp = line.rsplit(" ", 2)  # the field section holds no space
            tags = head.partition(",")[2]
            out += [f"{name},{tags} gauge=0.5 {stamp}" for name in PROFILING]
    return out


def outcome(events: list[LocalizationEvent]) -> list[tuple[object, ...]]:
    return [
        (e.trigger, e.severity, e.top.node, e.top.component, e.top.index) if e.top else
        (e.trigger, e.severity)
        for e in events
    ]  # fmt: skip


# The library's fault_xid79 and fault_ib_flapping on 6 nodes, not 12: the same events, half
# the rows to poll and translate (at 12 nodes the three cases took 6 minutes of the suite).
# Every shape goes through the replay and at least one InfluxDB source, Telegraf's through
# both; the two dcgm-exporter shapes share their translator and scenario, so each takes one
# InfluxDB source (the dcgm-v1 run alone cost three minutes of a loaded suite).
SIX_NODES = Path(__file__).resolve().parent / "scenarios"
CASES = {
    "dcgm-v1": (str(SIX_NODES / "fault_xid79_six_nodes.toml"), 340, "dcgm_v1", ("polled",)),
    "dcgm-v2": (str(SIX_NODES / "fault_xid79_six_nodes.toml"), 340, "dcgm_v2", ("backfill",)),
    "telegraf": (
        str(SIX_NODES / "fault_ib_flapping_six_nodes.toml"),
        370,
        "telegraf",
        ("polled", "backfill"),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_same_foreign_data_gives_the_same_events_from_every_source(
    influx: InfluxServer, influx_bucket: str, tmp_path: Path, case: str
) -> None:
    scenario, seconds, shape, sources = CASES[case]
    lines = foreign_replay(scenario, seconds, shape)
    if shape == "dcgm_v1":
        lines = with_profiling(lines)
    path = tmp_path / "foreign.lp"
    path.write_text("\n".join(lines) + "\n")
    from_file = run_in_process(LineProtocolSource(path, SHARDS, 10.0))
    assert from_file.events, "the replay must find the fault"

    write_lines(influx, influx_bucket, lines)
    stamps = [s for s in map(line_stamp, lines) if s is not None]
    start, stop = min(stamps) // WINDOW_NS * WINDOW_NS, max(stamps) + 1
    settings = influx.settings(influx_bucket)
    expected = outcome(from_file.events)
    results = []
    if "polled" in sources:
        polled = InfluxSource(
            settings,
            n_shards=SHARDS,
            start_ns=start,
            stop_ns=stop,
            clock=lambda: stop + 60 * 10**9,
        )
        results.append(run_in_process(polled))
    if "backfill" in sources:
        # A push source whose stream never came: every window is its Flux backfill.
        backfill = PushSource(
            settings,
            push_token="unused",
            port=free_port(),
            n_shards=SHARDS,
            start_ns=start,
            stop_ns=stop,
            clock=lambda: stop + 60 * 10**9,
        )
        results.append(run_in_process(backfill))
        assert sum(s.backfill_windows for s in backfill.stats.values()) > 0
    assert len(results) == len(sources)
    for result in results:
        assert outcome(result.events) == expected
        assert_same_errors(result, from_file)
    if shape == "dcgm_v1":
        unknown = [e for e in results[0].errors if e.reason == "foreign_field_unknown"]
        assert sorted(e.detail.split(":")[0] for e in unknown) == sorted(PROFILING)


def assert_same_errors(got: RunResult, want: RunResult) -> None:
    """The same records by code (the replay's details name line numbers, Flux has none)."""
    assert got.error_counts == want.error_counts
    assert set(got.error_counts) <= {"foreign_field_ignored", "foreign_field_unknown"}


def test_the_source_says_once_what_it_cannot_read(
    influx: InfluxServer, influx_bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    t0 = 1_767_225_600 * 10**9
    lines = [
        f"cpu,host=n1,cpu=cpu-total usage_idle=97.5 {t0 + 10**9}",
        f"mem,host=n1 used_percent=12.5 {t0 + 10**9}",
        f"nvidia_smi,host=n1,index=0,name=NVIDIA\\ H100\\ 80GB\\ HBM3 temperature_gpu=40i {t0}",
        f"host,cluster=c,node=n1 load1=0.5 {t0}",
    ]
    write_lines(influx, influx_bucket, lines)
    source = InfluxSource(
        influx.settings(influx_bucket),
        n_shards=2,
        start_ns=t0,
        stop_ns=t0 + 3 * WINDOW_NS,
        clock=lambda: t0 + 10 * WINDOW_NS,
    )
    parts = [source.build_part("in", name, None) for name in source.list_parts()]
    with caplog.at_level(logging.WARNING, "reflex_localize.flows.io.influx_source"):
        batches = [batch for part in parts for batch in part.next_batch()]
    for part in parts:
        part.close()
    told = [r.getMessage() for r in caplog.records if "not read" in r.getMessage()]
    assert len(told) == 1, told
    assert told[0].endswith("not read: cpu, mem"), told[0]
    read = Counter(frame.measurement for batch in batches for frame in batch.frames)
    assert read == Counter({"gpu": 1, "host": 1})
    assert not [error for batch in batches for error in batch.errors]


def test_a_live_push_after_a_backfill_gives_the_replays_events(
    influx: InfluxServer, influx_bucket: str, tmp_path: Path
) -> None:
    """``--source influx-push`` with dcgm-exporter data: what was written before the stream
    existed comes by the Flux backfill, the rest by the replication stream, one translator
    for both; the events are the replay's."""
    from test_push_source import LAG_S, SPEED, PacedWriter, by_window, stream_to

    from reflex_localize.influx.replication import remove_stream
    from reflex_localize.shell.push_wiring import replay_clock

    lines = foreign_replay("fault_xid79", 340, "dcgm_v2")
    path = tmp_path / "foreign.lp"
    path.write_text("\n".join(lines) + "\n")
    expected = outcome(run_in_process(LineProtocolSource(path, SHARDS, 10.0)).events)
    assert expected
    windows = by_window(lines)
    start = windows[0][0] * WINDOW_NS
    resume = start + 150 * 10**9  # before it: in the bucket only, for the backfill
    write_lines(influx, influx_bucket, [ln for w, batch in windows if w * WINDOW_NS < resume
                                        for ln in batch])  # fmt: skip
    token, port, name = f"t{time.time_ns()}", free_port(), f"foreign-{influx_bucket}"
    stream_to(influx, influx_bucket, port, token, name)
    clock, speed = replay_clock(f"{resume},{time.time_ns()},{SPEED}")
    source = PushSource(
        influx.settings(influx_bucket),
        push_token=token,
        port=port,
        n_shards=SHARDS,
        start_ns=start,
        stop_ns=start + 340 * 10**9,
        clock=clock,
        clock_speed=speed,
        lag_seconds=LAG_S,
    )
    later = [(w, batch) for w, batch in windows if w * WINDOW_NS >= resume]
    writer = PacedWriter(influx, influx_bucket, later, clock)
    writer.start()
    try:
        result = run_in_process(source)
    finally:
        writer.join(timeout=60)
        remove_stream(influx.settings(), name)
    assert writer.failure is None and writer.written == len(later)
    stats = source.stats.values()
    assert sum(s.backfill_windows for s in stats) > 0 and sum(s.lines for s in stats) > 0
    assert outcome(result.events) == expected
    assert set(result.error_counts) <= {"foreign_field_ignored", "foreign_field_unknown"}
