"""Every Flux query of the Grafana dashboards, and Grafana's substitution of macros and variables.

Grafana's InfluxDB (Flux) datasource replaces ``v.timeRangeStart``, ``v.timeRangeStop`` and
``v.windowPeriod`` with literals and ``${var}`` / ``$var`` with variable values before the query
leaves Grafana; :func:`render` does the same, so the tests run what Grafana would send.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

GRAFANA_DIR = Path(__file__).resolve().parents[1] / "dashboards" / "grafana"
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


@dataclass(frozen=True)
class Query:
    dashboard: str
    kind: str  # "panel", "variable" or "annotation"
    title: str
    panel_type: str
    flux: str

    @property
    def where(self) -> str:
        return f"{self.dashboard} {self.kind} {self.title!r}"


def dashboards() -> dict[str, dict[str, Any]]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(GRAFANA_DIR.glob("*.json"))}


def queries(name: str, board: dict[str, Any]) -> Iterator[Query]:
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            yield Query(name, "variable", variable["name"], "", variable["query"])
    for annotation in board["annotations"]["list"]:
        yield Query(name, "annotation", annotation["name"], "", annotation["target"]["query"])
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            yield Query(name, "panel", panel["title"], panel["type"], target["query"])


def all_queries() -> list[Query]:
    return [query for name, board in dashboards().items() for query in queries(name, board)]


def _flux_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def render(
    flux: str, variables: Mapping[str, str], start: datetime, stop: datetime, window: str
) -> str:
    """The query as Grafana sends it; an unknown variable is an error, not an empty string."""

    def value(match: re.Match[str]) -> str:
        name = match[1] or match[2]
        if name not in variables:
            raise KeyError(f"query uses undefined variable ${name}")
        return variables[name]

    flux = _VARIABLE.sub(value, flux.replace("${__", "\0"))  # ${__field...} is display-only
    return (
        flux.replace("\0", "${__")
        .replace("v.timeRangeStart", _flux_time(start))
        .replace("v.timeRangeStop", _flux_time(stop))
        .replace("v.windowPeriod", window)
    )


def constants(board: dict[str, Any]) -> dict[str, str]:
    return {
        variable["name"]: variable["query"]
        for variable in board["templating"]["list"]
        if variable["type"] == "constant"
    }
