"""Runs the localization flow in this process and gathers what it produced."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bytewax.inputs import Source
from bytewax.testing import run_main

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.io.sinks import callback_sinks
from reflex_localize.flows.judge.job_step import JobConfig
from reflex_localize.flows.localize import build_flow
from reflex_localize.flows.messages import ErrorRecord
from reflex_localize.schemas.codec import Point


@dataclass
class RunResult:
    events: list[LocalizationEvent] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    point_counts: Counter = field(default_factory=Counter)
    scores: dict[str, float] = field(default_factory=dict)  # latest score per entity

    @property
    def error_counts(self) -> Counter:
        return Counter(e.reason for e in self.errors)


def run_in_process(
    source: Source,
    *,
    window_seconds: float = 10.0,
    job_config: JobConfig | None = None,
    cluster: str | None = None,
    on_output: Callable[[str, Any], None] | None = None,
) -> RunResult:
    """Runs the real Bytewax flow (``run_main``: one worker, in this thread) over one cluster:
    ``cluster``, or None: the first its telemetry names (see :func:`flows.localize.build_flow`)."""
    result = RunResult()

    def collect(route: str, item: Any) -> None:
        if route == "event":
            result.events.append(item)
        elif route == "error":
            result.errors.append(item)
        elif route == "points":
            points: list[Point] = item
            for point in points:
                result.point_counts[point.measurement] += 1
                if point.measurement == "reflex_score":
                    key = "|".join(point.tags[k] for k in ("node", "component", "index"))
                    result.scores[key] = float(point.fields["score"])
        if on_output is not None:
            on_output(route, item)

    flow = build_flow(
        source,
        callback_sinks(collect),
        window_seconds=window_seconds,
        cluster=cluster,
        job_config=job_config,
    )
    run_main(flow)
    result.events.sort(key=lambda e: (e.time_ns, e.job))
    return result
