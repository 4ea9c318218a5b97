"""Builders for Grafana's classic dashboard JSON model, bound to Reflex's Flux datasource.

Dashboards are plain dicts written to ``dashboards/grafana/*.json`` by ``generate.py``.
Every panel, variable and annotation uses the provisioned datasource (``DATASOURCE_UID``), and
:func:`layout` places panels in rows of 24 columns so that none overlap.

>>> p = panel("timeseries", "Power", [target('from(bucket: "b")')], unit="watt")
>>> p["type"], p["fieldConfig"]["defaults"]["unit"], p["targets"][0]["refId"]
('timeseries', 'watt', 'A')
"""

from __future__ import annotations

from typing import Any

DATASOURCE_UID = "reflex-influxdb"
DATASOURCE = {"type": "influxdb", "uid": DATASOURCE_UID}
GRID_WIDTH = 24
TELEMETRY = "${telemetry_bucket}"
RESULTS = "${results_bucket}"

# Schema unit -> Grafana unit id (Grafana's "standard options" units).
GRAFANA_UNITS = {
    "ratio": "percentunit",
    "bytes": "bytes",
    "megahertz": "rotmhz",
    "watts": "watt",
    "celsius": "celsius",
    "seconds": "s",
    "gigabits_per_second": "Gbits",
    "megabits_per_second": "Mbits",
    "tokens_per_second": "suffix: tok/s",
}

Json = dict[str, Any]


def grafana_unit(schema_unit: str) -> str:
    return GRAFANA_UNITS.get(schema_unit, "short")


def target(query: str, ref_id: str = "A") -> Json:
    return {"datasource": DATASOURCE, "refId": ref_id, "query": query}


def thresholds(*steps: tuple[float, str]) -> Json:
    """Green below the first step, then each ``(value, colour)`` upwards."""
    return {
        "mode": "absolute",
        "steps": [{"color": "green", "value": None}]
        + [{"color": colour, "value": value} for value, colour in steps],
    }


def panel(
    kind: str,
    title: str,
    targets: list[Json],
    *,
    unit: str = "short",
    description: str = "",
    size: tuple[int, int] = (12, 8),
    display_name: str | None = None,
    steps: tuple[tuple[float, str], ...] = (),
    options: Json | None = None,
    overrides: list[Json] | None = None,
    links: list[Json] | None = None,
    rename: dict[str, str] | None = None,
) -> Json:
    """One panel; ``size`` is (width, height) in grid units, placed later by layout()."""
    defaults: Json = {"unit": unit, "thresholds": thresholds(*steps)}
    if steps:
        defaults["color"] = {"mode": "thresholds"}
    if display_name:
        defaults["displayName"] = display_name
    if links:
        defaults["links"] = links
    out: Json = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
        "options": options or {},
        "gridPos": {"x": 0, "y": 0, "w": size[0], "h": size[1]},
    }
    if rename:
        out["transformations"] = [{"id": "organize", "options": {"renameByName": rename}}]
    return out


def row(title: str, *, repeat: str | None = None) -> Json:
    out: Json = {"type": "row", "title": title, "collapsed": False, "panels": []}
    out["gridPos"] = {"x": 0, "y": 0, "w": GRID_WIDTH, "h": 1}
    if repeat:
        out["repeat"] = repeat
    return out


def layout(panels: list[Json]) -> list[Json]:
    """Gives panels ids and gridPos: left to right, wrapping at 24 columns; rows span all."""
    x = y = row_height = 0
    for panel_id, item in enumerate(panels, 1):
        width, height = item["gridPos"]["w"], item["gridPos"]["h"]
        if item["type"] == "row" or x + width > GRID_WIDTH:
            x, y, row_height = 0, y + row_height, 0
        item["id"] = panel_id
        item["gridPos"] = {"x": x, "y": y, "w": width, "h": height}
        x, row_height = x + width, max(row_height, height)
        if item["type"] == "row":
            x, y, row_height = 0, y + height, 0
    return panels


def constant(name: str, value: str) -> Json:
    """A hidden constant variable: a bucket name an operator can change in one place."""
    return {"type": "constant", "name": name, "query": value, "hide": 2}


def query_variable(name: str, label: str, flux: str, *, multi: bool = False) -> Json:
    """A variable filled by a Flux schema query; refreshed when the time range changes."""
    return {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DATASOURCE,
        "query": flux,
        "definition": flux,
        "refresh": 2,
        "sort": 1,
        "multi": multi,
        "includeAll": multi,
        "current": {},
        "options": [],
    }


def annotation(name: str, flux: str, colour: str = "red") -> Json:
    return {
        "name": name,
        "datasource": DATASOURCE,
        "enable": True,
        "iconColor": colour,
        "target": {"refId": "Anno", "query": flux},
    }


def dashboard(
    uid: str,
    title: str,
    panels: list[Json],
    variables: list[Json],
    annotations: list[Json],
    *,
    description: str,
) -> Json:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["reflex"],
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "timezone": "browser",
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "links": [
            {
                "type": "dashboards",
                "tags": ["reflex"],
                "asDropdown": True,
                "title": "Reflex",
                "includeVars": True,
                "keepTime": True,
            }
        ],
        "templating": {"list": variables},
        "annotations": {"list": annotations},
        "panels": layout(panels),
    }


# Compound score colours. Evidence weights in schemas/hardware are about 0.5-2 per signal, so
# 2 is "a couple of deviations piling up" and 4 "several, or one serious".
SCORE_STEPS = ((2.0, "orange"), (4.0, "red"))
SEVERITY_STEPS = ((2.0, "orange"), (3.0, "red"))
