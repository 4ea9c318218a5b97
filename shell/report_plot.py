"""The picture of an incident report: one PNG, one panel per suspect timeline (the suspect,
its peers' median and p10-p90 band, its own baseline) or for the job's step time per pipeline
stage, with the onset, the event and the explicit errors marked.

>>> from reflex_localize.flows.incidents.events import LocalizationEvent
>>> from reflex_localize.shell.report_gather import gather
>>> from reflex_localize.shell.report_sources import FrameSource
>>> event = LocalizationEvent("e1", 10**18, "sim", "job-1", "regression", "info", 0.6, [],
...                           "no hardware action", "imbalance")
>>> render_png(gather(event, FrameSource([]), 10.0))[:8]
b'\\x89PNG\\r\\n\\x1a\\n'
"""

from __future__ import annotations

import io
from datetime import UTC, datetime

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from reflex_localize.shell.report_gather import ReportData
from reflex_localize.shell.report_timeline import StageTimes, Timeline

SUSPECT_COLOR, PEER_COLOR, BASELINE_COLOR = "#c62828", "#1565c0", "#2e7d32"


def render_png(data: ReportData) -> bytes:
    panels = len(data.timelines) + (1 if data.stages is not None else 0)
    figure = Figure(figsize=(11, 3.3 * max(panels, 1)), dpi=100, layout="constrained")
    axes = figure.subplots(max(panels, 1), 1, squeeze=False)[:, 0]
    for ax, timeline in zip(axes, data.timelines, strict=False):
        _plot_timeline(ax, timeline, data)
    if data.stages is not None:
        _plot_stages(axes[len(data.timelines)], data.stages, data)
    if panels == 0:
        axes[0].text(0.5, 0.5, "no telemetry found for this event", ha="center", va="center")
        axes[0].set_axis_off()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _seconds(times_ns: np.ndarray, data: ReportData) -> np.ndarray:
    return (times_ns - data.onset_ns) / 1e9


def _plot_timeline(ax: Axes, timeline: Timeline, data: ReportData) -> None:
    x = _seconds(timeline.times_ns, data)
    if timeline.peer_count:
        ax.fill_between(
            x, timeline.peer_p10, timeline.peer_p90, color=PEER_COLOR, alpha=0.18,
            label="peers p10\u2013p90",
        )  # fmt: skip
        ax.plot(x, timeline.peer_median, color=PEER_COLOR, lw=1.4, label="peers median")
    if timeline.baseline_origin:
        low = timeline.baseline_center - timeline.baseline_spread
        high = timeline.baseline_center + timeline.baseline_spread
        ax.plot(x, timeline.baseline_center, color=BASELINE_COLOR, lw=1.2, ls="--",
                label="own baseline \u00b1 spread")  # fmt: skip
        ax.fill_between(x, low, high, color=BASELINE_COLOR, alpha=0.10)
    ax.plot(x, timeline.own, color=SUSPECT_COLOR, lw=2.2, marker="o", ms=2.5,
            label=f"suspect {_plain(timeline.entity)}")  # fmt: skip
    _mark_events(ax, data)
    ax.set_title(_plain(timeline.label), loc="left", fontsize=11)
    ax.set_xlabel(f"seconds from onset ({_clock(data.onset_ns)} UTC)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def _mark_events(ax: Axes, data: ReportData) -> None:
    ax.axvline(0.0, color="#555555", lw=1, ls=":")
    ax.axvline((data.event.time_ns - data.onset_ns) / 1e9, color="#555555", lw=1, ls="-.")
    for number, (when, signal) in enumerate(sorted(data.markers)):
        x = (when - data.onset_ns) / 1e9
        ax.axvline(x, color="#6a1b9a", lw=1.5)
        ax.annotate(_plain(signal), (x, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(4, -12 * (number + 1)), textcoords="offset points",
                    color="#6a1b9a", fontsize=8, fontweight="bold")  # fmt: skip


def _plot_stages(ax: Axes, stages: StageTimes, data: ReportData) -> None:
    x = _seconds(stages.times_ns, data)
    for stage, values in sorted(stages.compute.items()):
        ax.plot(
            x, values, lw=1.6, label=f"stage {stage} compute ({stages.ranks.get(stage, 0)} ranks)"
        )
    ax.plot(x, stages.step_time, color="black", lw=2, ls="--", label="job step time (median)")
    _mark_events(ax, data)
    ax.set_title(f"job {_plain(data.event.job)}: step time per pipeline stage", loc="left",
                 fontsize=11)  # fmt: skip
    ax.set_ylabel("seconds per step")
    ax.set_xlabel(f"seconds from the event ({_clock(data.onset_ns)} UTC)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def _plain(text: str) -> str:
    """Telemetry text for matplotlib, which would otherwise read ``$...$`` as math."""
    return text.replace("$", r"\$")


def _clock(time_ns: int) -> str:
    return datetime.fromtimestamp(time_ns / 1e9, tz=UTC).strftime("%H:%M:%S")
