"""Incident reports built from real events: the flow run on the simulator's demo scenario,
opened in headless Chromium and rebuilt from a real InfluxDB.

The demo scenario is used because it is the library's scenario with the faults a report must
show: a fail-slow GPU (regression), a pipeline imbalance (no hardware fault) and an XID 79
whose NCCL timeouts cascade (explicit). One flow run and one simulation serve every test.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS
from matplotlib.image import imread

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.runner import run_in_process
from reflex_localize.influx.local_server import InfluxServer
from reflex_localize.schemas.codec import Point, encode
from reflex_localize.schemas.frame import Frame
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.shell.report import command
from reflex_localize.shell.report_gather import gather, onset_of
from reflex_localize.shell.report_html import build_report
from reflex_localize.shell.report_sources import FrameSource, InfluxSource, ReplaySource
from reflex_localize.shell.simulated_source import SimulatorSource
from reflex_localize.simulator import Simulation, load_scenario

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
    assert demo.event("straggler").top is not None  # the fail-slow GPU, found step by step
    assert demo.event("step_pattern", hardware=False).top is None  # the imbalance
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
    event = demo.event("straggler")
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
    event = demo.event("step_pattern", hardware=False)
    data = gather(event, FrameSource(demo.frames), 10.0)
    stages = data.stages
    assert stages is not None and not data.timelines
    near = np.abs(stages.times_ns - event.time_ns) <= 30 * 10**9
    slowest = max(stages.compute, key=lambda s: np.nanmedian(stages.compute[s][near]))
    assert f"pipeline stage {slowest} " in event.summary  # the flow named the same stage
    before = stages.times_ns < event.time_ns - 60 * 10**9
    growth = {s: np.nanmedian(c[near]) / np.nanmedian(c[before]) for s, c in stages.compute.items()}
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
                out.writelines(line + "\n" for line in encode_frame(frame.take(rows)))
    return path


@pytest.mark.slow
def test_replay_file_gives_the_same_timelines_as_frames(demo: Demo, replay_file: Path) -> None:
    event = demo.event("straggler")
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


# ---- in a real browser, and from a real InfluxDB ----------------------------------------
# Chromium is Debian's package, installed by infra/apt_packages.sh; these tests skip only when
# it is absent and cannot be installed (no root, or no package mirror).

CHROMIUM = Path("/usr/bin/chromium")
APT_SCRIPT = Path(__file__).resolve().parents[1] / "infra" / "apt_packages.sh"
BROWSER_TIMEOUT_S = 120


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["bash", str(APT_SCRIPT)], capture_output=True, timeout=900, check=False)
    if not CHROMIUM.exists():
        pytest.skip("chromium is not installed and infra/apt_packages.sh could not install it")
    return CHROMIUM


def _browser(chromium: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}",
    ]  # fmt: skip
    return subprocess.run(
        [str(chromium), *flags, *args],
        capture_output=True,
        text=True,
        timeout=BROWSER_TIMEOUT_S,
        check=True,
    )


def _screenshot(chromium: Path, page: Path, out: Path, tmp_path: Path) -> np.ndarray:
    _browser(
        chromium, tmp_path / "profile-shot", f"--screenshot={out}", "--window-size=1280,2000",
        page.resolve().as_uri(),
    )  # fmt: skip
    return imread(out)


def _dom(chromium: Path, page: Path, tmp_path: Path) -> str:
    return _browser(
        chromium, tmp_path / "profile-dom", "--dump-dom", page.resolve().as_uri()
    ).stdout


@pytest.mark.slow
@pytest.mark.parametrize("trigger", ["straggler", "explicit", "no-hardware"])
def test_report_renders_in_chromium(
    chromium: Path, demo: Demo, tmp_path: Path, trigger: str
) -> None:
    event = (
        demo.event("step_pattern", hardware=False)
        if trigger == "no-hardware"
        else demo.event(trigger)
    )
    html_path, _ = build_report(event, FrameSource(demo.frames), tmp_path / "report")
    pixels = _screenshot(chromium, html_path, tmp_path / "shot.png", tmp_path)
    assert pixels.shape[:2] == (2000, 1280)
    gray = pixels[..., :3].mean(axis=2)
    assert gray.std() > 0.05  # not blank
    assert (gray < 0.5).mean() > 0.005  # text and plot lines were drawn
    dom = _dom(chromium, html_path, tmp_path)
    for element in (
        'id="report-header"', 'id="action"', 'id="timeline-img"', 'class="timeline"',
        'id="evidence"', 'id="summary"',
    ):  # fmt: skip
        assert element in dom, element
    image = re.search(r'<img id="timeline-img"[^>]*src="data:image/png;base64,', dom)
    assert image is not None
    if trigger == "no-hardware":
        assert 'id="stages-table"' in dom
    else:
        assert 'id="evidence-table"' in dom and 'id="suspects-table"' in dom
    if trigger == "explicit":
        assert 'id="cascade-table"' in dom


@pytest.mark.slow
def test_hostile_telemetry_stays_text_in_the_browser(
    chromium: Path, demo: Demo, tmp_path: Path
) -> None:
    event, frames = hostile_case(demo)
    html_path, _ = build_report(event, FrameSource(frames), tmp_path / "report")
    dom = _dom(chromium, html_path, tmp_path)
    assert "<script" not in dom and "<b>" not in dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom  # shown as text, not run
    assert "&quot;&amp;&lt;&gt;" in dom or '"&amp;&lt;&gt;' in dom


def _write(server: InfluxServer, bucket: str, lines: list[str]) -> None:
    with InfluxDBClient(server.url, server.token, org=server.org, timeout=60_000) as client:
        write = client.write_api(write_options=SYNCHRONOUS)
        for start in range(0, len(lines), 20_000):
            write.write(bucket, server.org, "\n".join(lines[start : start + 20_000]))


@pytest.mark.influx
@pytest.mark.slow
def test_report_from_influxdb_uses_the_flows_stored_baseline(
    influx: InfluxServer, influx_bucket: str, demo: Demo, tmp_path: Path
) -> None:
    event = demo.event("straggler")
    top = event.top
    assert top is not None
    start = event.time_ns - 420 * 10**9
    job_nodes = {
        node
        for f in demo.frames
        if f.measurement == "job_membership"
        for node in f.tags["node"][f.tags["job"] == event.job].tolist()
    }
    lines = []
    for frame in demo.frames:
        if frame.measurement not in ("gpu", "train_step", "job_membership", "event"):
            continue
        rows = (frame.time_ns >= start) & np.isin(frame.tags["node"], list(job_nodes))
        if rows.any():
            lines += encode_frame(frame.take(rows))
    # The flow's own baseline of the suspect, as it would have written it to the results bucket.
    baseline = [
        encode(
            Point(
                "reflex_baseline",
                {"cluster": event.cluster, "node": top.node, "component": top.component,
                 "index": top.index, "signal": "sm_clock_low", "state": "busy"},
                {"center": 1950.0, "scale": 12.0, "count": 600},
                start + i * 30 * 10**9,
            )
        )
        for i in range(14)
    ]  # fmt: skip
    _write(influx, influx_bucket, lines)
    _write(influx, influx_bucket, baseline)
    source = InfluxSource(
        influx.settings(influx_bucket, timeout_s=120), results_bucket=influx_bucket
    )
    assert influx.token not in repr(source)
    clocks = gather(event, source, 10.0).timelines[0]
    assert clocks.signal == "sm_clock_low" and clocks.baseline_origin.startswith("reflex_baseline")
    assert np.nanmax(clocks.baseline_center) == 1950.0 and clocks.peer_count > 10
    memory = gather(event, FrameSource(demo.frames), 10.0).timelines[0]
    np.testing.assert_allclose(clocks.own, memory.own, equal_nan=True)

    token_file = tmp_path / "token"
    token_file.write_text(influx.token)
    token_file.chmod(0o600)
    events_path = tmp_path / "events.jsonl"
    events_path.write_text("".join(e.to_json() + "\n" for e in demo.events))
    result = CliRunner().invoke(
        command,
        [event.event_id, "--events", str(events_path), "--influx-url", influx.url,
         "--token-file", str(token_file), "--org", influx.org, "--bucket", influx_bucket,
         "--results-bucket", influx_bucket, "--timeout", "120", "--out", str(tmp_path / "out")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    page = Path(result.output.splitlines()[0]).read_text()
    assert "reflex_baseline" in page and influx.token not in page + result.output


@pytest.mark.influx
def test_a_report_query_over_a_thousand_nodes_compiles_and_picks_them(
    influx: InfluxServer, influx_bucket: str
) -> None:
    """A large job's nodes in one query: a flat chain of 1,000 ``or`` terms fails to compile
    in InfluxDB ("Program is nested too deep"); the source pairs them into a tree."""
    t0 = 1_767_225_600 * 10**9
    nodes = [f"node-{i:04d}" for i in range(1200)]
    _write(influx, influx_bucket, [f"host,cluster=c,node={n} load1=0.5 {t0}" for n in nodes])
    source = InfluxSource(influx.settings(influx_bucket), results_bucket=influx_bucket)
    frames = source.frames("host", t0, t0 + 10**9, nodes=nodes[100:1100])
    picked = sorted(str(node) for frame in frames for node in frame.tags["node"])
    assert picked == nodes[100:1100]
