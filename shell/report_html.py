"""Incident reports: one self-contained HTML page and one PNG per localization event.

The page carries everything inline (CSS, the PNG as base64), so it can be attached to a
ticket or mailed and still open years later. It shows the event, the recommended action, the
top suspect's strongest signals against its peers and its own baseline, the evidence, the
ranked suspects, root versus cascade for explicit errors, and for "no hardware fault" events
the job's step time per pipeline stage. Every string that came from telemetry (node names,
kmsg text, summary, action) is HTML-escaped. What it shows is gathered by
:mod:`~reflex_localize.shell.report_gather` and drawn by
:mod:`~reflex_localize.shell.report_plot`.

>>> from reflex_localize.flows.incidents.events import LocalizationEvent
>>> from reflex_localize.shell.report_sources import FrameSource
>>> import tempfile, pathlib
>>> event = LocalizationEvent("e1", 10**18, "sim", "job<1>", "regression", "info", 0.6, [],
...                           "no hardware action", "imbalance")
>>> html_path, png_path = build_report(event, FrameSource([]), pathlib.Path(tempfile.mkdtemp()))
>>> "job&lt;1&gt;" in html_path.read_text(), png_path.suffix
(True, '.png')
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from html import escape
from pathlib import Path

import numpy as np

from reflex_localize.flows.incidents.events import LocalizationEvent, Suspect
from reflex_localize.shell.report_gather import (
    BUCKET_S,
    ObservedCascade,
    ReportData,
    gather,
    is_explicit,
)
from reflex_localize.shell.report_plot import render_png
from reflex_localize.shell.report_sources import TimelineSource
from reflex_localize.shell.report_timeline import LoggedEvent, StageTimes

STAGE_BEFORE_S, STAGE_AROUND_S = 60.0, 30.0


def build_report(
    event: LocalizationEvent,
    timeline_source: TimelineSource,
    out_dir: Path,
    *,
    bucket_s: float = BUCKET_S,
) -> tuple[Path, Path]:
    """Writes ``<event_id>.html`` and ``<event_id>.png`` into ``out_dir``; returns both."""
    data = gather(event, timeline_source, bucket_s)
    png = render_png(data)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = _file_stem(event.event_id)
    png_path, html_path = out_dir / f"{name}.png", out_dir / f"{name}.html"
    png_path.write_bytes(png)
    html_path.write_text(render_html(data, png), encoding="utf-8")
    return html_path, png_path


def _file_stem(event_id: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in event_id)
    return f"reflex-event-{safe or 'unknown'}"


CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Liberation Sans",sans-serif;
margin:0;background:#f4f5f7;color:#1d1f23}
main{max-width:1180px;margin:0 auto;padding:24px}
section,header{background:#fff;border-radius:8px;padding:16px 20px;margin-bottom:16px;
box-shadow:0 1px 2px rgba(0,0,0,.08)}
h1{font-size:22px;margin:0 0 8px}
h2{font-size:16px;margin:0 0 10px;color:#333}
dl{display:flex;flex-wrap:wrap;gap:8px 32px;margin:10px 0}
dt{color:#666;font-size:12px;text-transform:uppercase}
dd{margin:0;font-weight:600}
.summary{font-size:15px;margin:8px 0 0}
.action{border-left:8px solid #c62828;background:#fff4f4}
.action.no-hardware{border-left-color:#1565c0;background:#f2f7fd}
.action p{font-size:20px;font-weight:700;margin:0}
.sev-critical{color:#b71c1c}.sev-warning{color:#e65100}.sev-info{color:#1565c0}
img.timeline{width:100%;height:auto;display:block}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #e3e5e8}
th{background:#fafbfc;color:#555;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.time,td.node{white-space:nowrap}
tr.root td{background:#fff4f4;font-weight:600}
.note{color:#666;font-size:12px;margin:6px 0 0}
footer{color:#888;font-size:11px;text-align:center;padding:8px}
code{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px}
"""


def render_html(data: ReportData, png: bytes) -> str:
    event = data.event
    parts = [
        _header(event),
        _action(event),
        _cascade(data),
        _timeline_section(data, png),
        _evidence(event.top),
        _suspects(event),
        _stages_table(data.stages, event.time_ns) if data.stages is not None else "",
        _log(data.log),
    ]
    body = "\n".join(part for part in parts if part)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Reflex incident {_e(event.event_id)}: {_e(event.job)}</title>"
        f"<style>{CSS}</style></head>\n<body><main>\n{body}\n"
        f"<footer>Reflex incident report, event <code>{_e(event.event_id)}</code></footer>"
        "\n</main></body></html>\n"
    )


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _z(value: float | None) -> str:
    return "\u2013" if value is None else f"{value:+.1f}\u03c3"


def _stamp(time_ns: int) -> str:
    return datetime.fromtimestamp(time_ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _header(event: LocalizationEvent) -> str:
    items = [
        ("job", _e(event.job)),
        ("trigger", _e(event.trigger)),
        ("severity", f'<span class="sev-{_e(event.severity)}">{_e(event.severity)}</span>'),
        ("confidence", f"{event.confidence:.0%}"),
        ("time", _e(_stamp(event.time_ns))),
        ("cluster", _e(event.cluster)),
    ]
    cells = "".join(f'<div><dt>{k}</dt><dd id="event-{k}">{v}</dd></div>' for k, v in items)
    return (
        '<header id="report-header" class="report-header">'
        f"<h1>Incident in job {_e(event.job)}</h1>"
        f"<dl>{cells}</dl>"
        f'<p id="summary" class="summary">{_e(event.summary)}</p>'
        f'<p class="note">event <code>{_e(event.event_id)}</code></p></header>'
    )


def _action(event: LocalizationEvent) -> str:
    where = ""
    if event.top is not None:
        top = event.top
        where = f" on <strong>{_e(top.node)}</strong> {_e(top.component)} {_e(top.index)}"
    elif event.no_hardware_fault:
        where = " (no hardware fault)"
    kind = "action no-hardware" if event.no_hardware_fault else "action"
    return (
        f'<section id="action" class="{kind}"><h2>Recommended action' + where + "</h2>"
        f"<p>{_e(event.action)}</p></section>"
    )


def _cascade(data: ReportData) -> str:
    event = data.event
    roots = [s for s in event.suspects if s.role == "root"]
    if not roots and not event.cascade and data.observed_cascade is None:
        return ""
    rows = []
    for root in roots:
        first = min((e.since_ns for e in root.evidence), default=event.time_ns)
        errors = ", ".join(e.signal for e in root.evidence if is_explicit(e)) or "-"
        rows.append(
            f'<tr class="root"><td>root (first in time)</td><td>{_e(root.node)}</td>'
            f"<td>{_e(root.component)} {_e(root.index)}</td><td>{_e(errors)}</td>"
            f"<td>{_e(_stamp(first))}</td></tr>"
        )
    if event.cascade:
        cascade = event.cascade
        first_ns = cascade.get("first_ns")
        when = _stamp(first_ns) if isinstance(first_ns, int) else "-"
        if roots and isinstance(first_ns, int):
            root_first = min(e.since_ns for e in roots[0].evidence) if roots[0].evidence else None
            if root_first is not None:
                when += f" ({(first_ns - root_first) / 1e9:+.1f} s after the root)"
        rows.append(
            f"<tr><td>cascade at the event</td><td>{_e(cascade.get('nodes', '?'))} nodes</td>"
            f"<td>{_e(cascade.get('events', '?'))} events</td>"
            f"<td>{_e(cascade.get('kind', '?'))}</td><td>{_e(when)}</td></tr>"
        )
    rows += _observed_row(data.observed_cascade, roots)
    return (
        '<section id="cascade" class="cascade"><h2>Root versus cascade</h2>'
        '<table id="cascade-table"><thead><tr><th>role</th><th>node(s)</th><th>component</th>'
        "<th>errors</th><th>first seen</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></section>"
    )


def _observed_row(observed: ObservedCascade | None, roots: list[Suspect]) -> list[str]:
    if observed is None:
        return []
    when = _stamp(observed.first_ns)
    if roots and roots[0].evidence:
        when += (
            f" (+{(observed.first_ns - min(e.since_ns for e in roots[0].evidence)) / 1e9:.1f} s)"
        )
    return [
        f"<tr><td>cascade in telemetry</td><td>{observed.nodes} nodes</td>"
        f"<td>{observed.events} events</td><td>{_e(observed.kinds)}</td><td>{_e(when)}</td></tr>"
    ]


def _timeline_section(data: ReportData, png: bytes) -> str:
    notes = []
    for timeline in data.timelines:
        origin = timeline.baseline_origin or "not enough history before the onset"
        notes.append(
            f"<li><code>{_e(timeline.signal)}</code> of {_e(timeline.entity)}: peers are "
            f"{_e(timeline.peer_label)}; own baseline from {_e(origin)}.</li>"
        )
    if data.stages is not None:
        notes.append(
            "<li>Median compute time per pipeline stage, and the job's median step time.</li>"
        )
    title = "Suspect timeline" if data.timelines else "Job step time per pipeline stage"
    encoded = base64.b64encode(png).decode("ascii")
    return (
        f'<section id="timeline" class="timeline-section"><h2>{title}</h2>'
        f'<img id="timeline-img" class="timeline" alt="{_e(title)}" '
        f'src="data:image/png;base64,{encoded}">'
        f'<ul class="note">{"".join(notes)}</ul>'
        '<p class="note">Dotted line: onset. Dash-dotted line: the event. Purple: explicit '
        "errors.</p></section>"
    )


def _evidence(top: Suspect | None) -> str:
    if top is None:
        return (
            '<section id="evidence" class="evidence"><h2>Evidence</h2>'
            '<p id="no-suspect">No hardware suspect: no node or component deviates from its '
            "own baseline and its peers enough to explain the symptom.</p></section>"
        )
    rows = "".join(
        f"<tr><td><code>{_e(e.signal)}</code></td><td class=num>{_z(e.temporal_z)}</td>"
        f"<td class=num>{_z(e.peer_z)}</td><td class=num>{e.weight:.2f}</td>"
        f"<td>{_e(_stamp(e.since_ns))}</td></tr>"
        for e in sorted(top.evidence, key=lambda e: -e.weight)
    )
    return (
        '<section id="evidence" class="evidence">'
        f"<h2>Evidence against {_e(top.node)} {_e(top.component)} {_e(top.index)}</h2>"
        '<table id="evidence-table" class="evidence-table"><thead><tr><th>signal</th>'
        "<th class=num>vs own baseline</th><th class=num>vs peers</th><th class=num>weight</th>"
        "<th>since</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></section>"
    )


def _suspects(event: LocalizationEvent) -> str:
    if not event.suspects:
        return ""
    rows = "".join(
        f'<tr class="{"root" if s.role == "root" else ""}"><td class=num>{rank}</td>'
        f"<td>{_e(s.node)}</td><td>{_e(s.component)}</td><td>{_e(s.index)}</td>"
        f"<td class=num>{s.score:.2f}</td><td>{_e(s.role or '')}</td>"
        f"<td><code>{_e(s.evidence[0].signal if s.evidence else '')}</code></td></tr>"
        for rank, s in enumerate(event.suspects, 1)
    )
    return (
        '<section id="suspects" class="suspects"><h2>Ranked suspects</h2>'
        '<table id="suspects-table" class="suspects-table"><thead><tr><th class=num>#</th>'
        "<th>node</th><th>component</th><th>index</th><th class=num>score</th><th>role</th>"
        "<th>top signal</th>"
        f"</tr></thead><tbody>{rows}</tbody></table></section>"
    )


def _stages_table(stages: StageTimes, event_ns: int) -> str:
    """Median compute per stage well before the event and around it: the stage that grew."""
    before = stages.times_ns < event_ns - int(STAGE_BEFORE_S * 1e9)
    around = np.abs(stages.times_ns - event_ns) <= int(STAGE_AROUND_S * 1e9)
    rows = "".join(
        f"<tr><td class=num>{stage}</td><td class=num>{stages.ranks.get(stage, 0)}</td>"
        f"<td class=num>{_median(values[before]):.3f}</td>"
        f"<td class=num>{_median(values[around]):.3f}</td></tr>"
        for stage, values in sorted(stages.compute.items())
    )
    return (
        '<section id="stages" class="stages"><h2>Step time per pipeline stage</h2>'
        '<table id="stages-table"><thead><tr><th class=num>stage</th><th class=num>ranks</th>'
        "<th class=num>compute s/step before</th><th class=num>compute s/step at the event</th>"
        f"</tr></thead><tbody>{rows}</tbody></table>"
        f'<p class="note">Job median step time: {_median(stages.step_time[before]):.3f} s '
        f"before, {_median(stages.step_time[around]):.3f} s at the event. A slower stage is "
        "pipeline imbalance, not a hardware fault.</p></section>"
    )


def _median(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if len(finite) else float("nan")


def _log(log: list[LoggedEvent]) -> str:
    if not log:
        return ""
    rows = "".join(
        f"<tr><td class=time>{_e(_stamp(e.time_ns))}</td><td class=node>{_e(e.node)}</td>"
        f"<td>{_e(e.source)}</td>"
        f"<td>{_e(e.kind)}</td><td class=num>{'' if e.code is None else e.code}</td>"
        f"<td><code>{_e(e.message)}</code></td></tr>"
        for e in log
    )
    return (
        '<section id="events" class="event-log"><h2>Events logged by the suspect nodes and '
        "the job</h2>"
        '<table id="events-table"><thead><tr><th>time</th><th>node</th><th>source</th>'
        "<th>kind</th><th>code</th><th>message</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></section>"
    )
