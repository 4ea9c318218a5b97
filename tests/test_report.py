"""Incident reports built from real events: the flow run on the simulator's demo scenario.

The demo scenario is used because it is the library's scenario with the faults a report must
show: a fail-slow GPU (regression), a pipeline imbalance (no hardware fault) and an XID 79
whose NCCL timeouts cascade (explicit). One flow run and one simulation serve every test.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from collectors.simulated import Simulation, load_scenario
from collectors.simulated.lineproto import frame_lines
from flows.events import LocalizationEvent
from flows.runner import run_in_process
from flows.sources import SimulatorSource
from reflex.report import build_report, gather, onset_of
from reflex.report_cli import command
from reflex.report_timeline import FrameSource, ReplaySource
from schemas.frame import Frame

HOSTILE_NODE = "<script>alert(1)</script>"
HOSTILE_TEXT = 'Xid 79 "&<> on the bus'


@dataclass
class Demo:
    frames: list[Frame]
    events: list[LocalizationEvent]

    def event(self, trigger: str, *, hardware: bool = True) -> LocalizationEvent:
        """The first event of ``trigger``; for "explicit", the XID (the demo's injected one)."""
        return next(
            e
            for e in self.events
            if e.trigger == trigger
            and e.no_hardware_fault != hardware
            and (trigger != "explicit" or _is_xid(e))
        )


def _is_xid(event: LocalizationEvent) -> bool:
    return event.top is not None and event.top.evidence[0].signal.startswith("xid:")


@pytest.fixture(scope="session")
def demo() -> Demo:
    frames = [
        f for chunk in Simulation(load_scenario("demo"), seed=7).chunks(seconds=10) for f in chunk
    ]
    events = run_in_process(SimulatorSource("demo", 7, 1, 10.0)).events
    return Demo(frames, events)


def test_the_flow_gives_one_event_of_each_kind(demo: Demo) -> None:
    assert demo.event("regression").top is not None
    assert demo.event("regression", hardware=False).top is None
    assert demo.event("explicit").top.role == "root"  # type: ignore[union-attr]


def test_every_event_gets_one_self_contained_page_and_a_png(demo: Demo, tmp_path: Path) -> None:
    """Whatever the event (also e.g. an MCE, which has no signal to plot)."""
    for event in demo.events:
        _check_page(event, *build_report(event, FrameSource(demo.frames), tmp_path))


def _check_page(event: LocalizationEvent, html_path: Path, png_path: Path) -> None:
    page = html_path.read_text()
    png = png_path.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 20_000
    assert base64.b64encode(png).decode() in page
    assert not re.search(r"<(script|link|iframe)\b|src=\"(?!data:)|url\(|@import", page)
    for element in ('id="report-header"', 'id="action"', 'id="timeline-img"', 'id="evidence"'):
        assert element in page
    assert event.action.replace("'", "&#x27;") in page
    assert f"{event.confidence:.0%}" in page


def test_fail_slow_gpu_stands_out_from_peers_and_its_own_baseline(demo: Demo) -> None:
    event = demo.event("regression")
    data = gather(event, FrameSource(demo.frames), 10.0)
    clocks = data.timelines[0]
    assert (clocks.signal, clocks.entity) == ("sm_clock_low", event.top.entity)  # type: ignore[union-attr]
    after = clocks.times_ns > onset_of(event)
    before = clocks.times_ns < onset_of(event)
    assert clocks.peer_count > 10 and "h100" in clocks.peer_label  # same hardware only
    gap_to_peers = np.nanmedian(clocks.peer_median[after] - clocks.own[after])
    assert gap_to_peers > 10 * np.nanmedian(clocks.peer_p90[after] - clocks.peer_p10[after])
    assert clocks.baseline_origin.startswith("own history")
    assert np.nanmedian(clocks.own[after]) < np.nanmedian(
        clocks.baseline_center - 3 * clocks.baseline_spread
    )
    assert abs(np.nanmedian(clocks.own[before]) - clocks.baseline_center[0]) < 30


def test_no_hardware_event_shows_the_slow_pipeline_stage(demo: Demo, tmp_path: Path) -> None:
    event = demo.event("regression", hardware=False)
    data = gather(event, FrameSource(demo.frames), 10.0)
    assert data.stages is not None and not data.timelines
    near = np.abs(data.stages.times_ns - event.time_ns) <= 30 * 10**9
    slowest = max(data.stages.compute, key=lambda s: np.nanmedian(data.stages.compute[s][near]))
    assert f"pipeline stage {slowest} " in event.summary  # the flow named the same stage
    before = data.stages.times_ns < event.time_ns - 60 * 10**9
    growth = {
        s: np.nanmedian(c[near]) / np.nanmedian(c[before]) for s, c in data.stages.compute.items()
    }
    assert growth[slowest] > 1.15 and all(g < 1.05 for s, g in growth.items() if s != slowest)
    page = build_report(event, FrameSource(demo.frames), tmp_path)[0].read_text()
    assert 'id="stages-table"' in page and 'class="action no-hardware"' in page
    assert 'id="no-suspect"' in page


def test_explicit_error_separates_root_from_cascade(demo: Demo, tmp_path: Path) -> None:
    event = demo.event("explicit")
    root = event.top
    assert root is not None
    data = gather(event, FrameSource(demo.frames), 10.0)
    assert "xid:79" in {signal for _, signal in data.markers}
    assert data.observed_cascade is not None and data.observed_cascade.nodes > 3
    assert data.observed_cascade.first_ns > min(e.since_ns for e in root.evidence)
    page = build_report(event, FrameSource(demo.frames), tmp_path)[0].read_text()
    root_row = re.search(r'<tr class="root"><td>root \(first in time\)</td><td>([^<]*)</td>', page)
    assert root_row is not None and root_row.group(1) == root.node
    assert "cascade in telemetry" in page and "nccl_timeout" in page


def _rename(frame: Frame, old: str, new: str) -> Frame:
    tags = dict(frame.tags)
    if "node" in tags:
        tags["node"] = np.where(tags["node"] == old, new, tags["node"]).astype(object)
    fields = dict(frame.fields)
    if frame.measurement == "event" and "message" in fields:
        on_node = tags["node"] == new
        fields["message"] = np.where(on_node, HOSTILE_TEXT, fields["message"]).astype(object)
    return Frame(frame.measurement, frame.time_ns, tags, fields)


def hostile_case(demo: Demo) -> tuple[LocalizationEvent, list[Frame]]:
    """The XID event with the root node named like a script tag and kmsg text full of
    HTML metacharacters, in the telemetry and in the event alike."""
    event = demo.event("explicit")
    root = event.top
    assert root is not None
    frames = [_rename(f, root.node, HOSTILE_NODE) for f in demo.frames]
    suspects = [replace(s, node=HOSTILE_NODE) if s.node == root.node else s for s in event.suspects]
    hostile = replace(
        event,
        suspects=suspects,
        summary=f"{HOSTILE_TEXT} on {HOSTILE_NODE}",
        action=f"drain {HOSTILE_NODE} & check <b>",
        job="llm-a",
    )
    return hostile, frames


def test_every_telemetry_string_is_escaped(demo: Demo, tmp_path: Path) -> None:
    event, frames = hostile_case(demo)
    page = build_report(event, FrameSource(frames), tmp_path)[0].read_text()
    assert HOSTILE_NODE not in page and "<b>" not in page and HOSTILE_TEXT not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Xid 79 &quot;&amp;&lt;&gt; on the bus" in page  # the kmsg line in the event log
    assert page.count("<script") == 0


@pytest.fixture(scope="session")
def replay_file(demo: Demo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An incident capture: the demo's telemetry from 7 minutes before its first event on."""
    path = tmp_path_factory.mktemp("replay") / "incident.lp"
    start = min(e.time_ns for e in demo.events) - 420 * 10**9
    with path.open("w") as out:
        for frame in demo.frames:
            rows = frame.time_ns >= start
            if rows.any():
                out.writelines(line + "\n" for line in frame_lines(frame.take(rows)))
    return path


@pytest.mark.slow
def test_replay_file_gives_the_same_timelines_as_frames(demo: Demo, replay_file: Path) -> None:
    event = demo.event("regression")
    replay = ReplaySource(replay_file)
    from_file, from_memory = (
        gather(event, replay, 10.0),
        gather(event, FrameSource(demo.frames), 10.0),
    )
    assert replay.rejected == 0
    assert [t.signal for t in from_file.timelines] == [t.signal for t in from_memory.timelines]
    for a, b in zip(from_file.timelines, from_memory.timelines, strict=True):
        np.testing.assert_allclose(a.own, b.own, equal_nan=True)
        np.testing.assert_allclose(a.peer_median, b.peer_median, equal_nan=True)


@pytest.mark.slow
def test_cli_rebuilds_a_past_event_from_a_replay(
    demo: Demo, replay_file: Path, tmp_path: Path
) -> None:
    event = demo.event("explicit")
    events_path = tmp_path / "events.jsonl"
    events_path.write_text("".join(e.to_json() + "\n" for e in demo.events))
    replay = replay_file
    out = tmp_path / "reports"
    result = CliRunner().invoke(
        command,
        [event.event_id[:8], "--events", str(events_path), "--replay", str(replay),
         "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    html_path = Path(result.output.splitlines()[0])
    assert html_path.parent == out and event.event_id in html_path.name
    assert event.top is not None and event.top.node in html_path.read_text()


def test_cli_refuses_unclear_requests(demo: Demo, tmp_path: Path) -> None:
    events_path = tmp_path / "events.jsonl"
    events_path.write_text("".join(e.to_json() + "\n" for e in demo.events))
    runner = CliRunner()
    no_source = runner.invoke(command, [demo.events[0].event_id, "--events", str(events_path)])
    assert (
        no_source.exit_code == 2 and "exactly one of --replay and --influx-url" in no_source.output
    )
    unknown = runner.invoke(
        command, ["ffffffff", "--events", str(events_path), "--replay", str(events_path)]
    )
    assert unknown.exit_code == 1 and "no event 'ffffffff'" in unknown.output
    loose = tmp_path / "token"
    loose.write_text("s3cret-token")
    loose.chmod(0o644)
    refused = runner.invoke(
        command,
        [demo.events[0].event_id, "--events", str(events_path), "--influx-url",
         "http://127.0.0.1:9", "--token-file", str(loose)],
    )  # fmt: skip
    assert refused.exit_code == 1 and "chmod 600" in refused.output
    assert "s3cret-token" not in refused.output
