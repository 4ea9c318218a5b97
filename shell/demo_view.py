"""The demo's live terminal view: progress, the current top scores, events as they fire."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.live import Live
from rich.panel import Panel
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.schemas.codec import Point


class DemoView:
    """Fed by the flow's outputs (``on_output(route, item)``); redraws a few times a second."""

    def __init__(self, start_ns: int, duration_s: float, live: bool = True) -> None:
        self.start_ns, self.duration_s = start_ns, duration_s
        self.scores: dict[str, tuple[float, str]] = {}
        self.events: list[LocalizationEvent] = []
        self.errors = 0
        self.progress = Progress(
            TextColumn("simulated time"),
            BarColumn(),
            TextColumn("{task.completed:.0f}/{task.total:.0f} s"),
            TimeElapsedColumn(),
        )
        self.task = self.progress.add_task("sim", total=duration_s)
        self.live = Live(self._render(), refresh_per_second=4, transient=False) if live else None

    def __enter__(self) -> DemoView:
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.live.update(self._render())
            self.live.__exit__(None, None, None)
            if not self.live.console.is_terminal:  # rich ends the last line on a terminal only
                self.live.console.line()

    def on_output(self, route: str, item: Any) -> None:
        if route == "event":
            self.events.append(item)
        elif route == "error":
            self.errors += 1
        elif route == "points":
            self._take_scores(item)
        if self.live:
            self.live.update(self._render())

    def _take_scores(self, points: list[Point]) -> None:
        for point in points:
            if point.measurement != "reflex_score":
                continue
            key = f"{point.tags['node']} {point.tags['component']} {point.tags['index']}"
            self.scores[key] = (float(point.fields["score"]), str(point.fields["top_signal"]))
            done = (point.time_ns - self.start_ns) / 1e9
            self.progress.update(self.task, completed=min(done, self.duration_s))

    def _render(self) -> Group:
        top = Table(title="top compound scores", expand=True)
        for column in ("entity", "score", "strongest signal"):
            top.add_column(column)
        for key, (score, signal) in sorted(self.scores.items(), key=lambda kv: -kv[1][0])[:6]:
            top.add_row(key, f"{score:.1f}", signal)
        fired = Table(title=f"localization events ({len(self.events)})", expand=True)
        for column in ("t (s)", "job", "trigger", "suspect", "summary"):
            fired.add_column(column, overflow="fold")
        for event in self.events[-8:]:
            suspect = event.top
            fired.add_row(
                f"{(event.time_ns - self.start_ns) / 1e9:.0f}",
                event.job,
                event.trigger,
                f"{suspect.node} {suspect.component} {suspect.index}"
                if suspect
                else "no hardware fault",
                event.summary,
            )
        errors = f"rejected records: {self.errors}"
        return Group(self.progress, top, fired, Panel(errors, expand=False))
