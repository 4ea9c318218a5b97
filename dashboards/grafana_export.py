"""The dashboards as Grafana's "Export for sharing externally" writes them, for a UI import.

A provisioned dashboard names its datasource by uid (``reflex-influxdb``, created by the
provisioning file); imported through the UI into a Grafana whose InfluxDB datasource has
another uid, every panel would show "datasource not found". The export form declares the
datasource as an input (``__inputs``) and refers to it as ``${DS_REFLEX_INFLUXDB}``, so the
import dialog asks which InfluxDB (Flux) datasource to use. Both forms come from the same
builders (``generate.py`` writes them side by side).

>>> board = {"id": 3, "panels": [{"type": "stat", "datasource": DATASOURCE}]}
>>> out = exported(board)
>>> out["__inputs"][0]["name"], out["panels"][0]["datasource"]["uid"], "id" in out
('DS_REFLEX_INFLUXDB', '${DS_REFLEX_INFLUXDB}', False)
"""

from __future__ import annotations

from typing import Any

from reflex_localize.dashboards.grafana_model import DATASOURCE, Json

INPUT_NAME = "DS_REFLEX_INFLUXDB"
INPUT_DATASOURCE = {"type": DATASOURCE["type"], "uid": "${" + INPUT_NAME + "}"}
DATASOURCE_INPUT = {
    "name": INPUT_NAME,
    "label": "InfluxDB (Flux)",
    "description": "The InfluxDB 2.x datasource, query language Flux, that holds Reflex's buckets",
    "type": "datasource",
    "pluginId": "influxdb",
    "pluginName": "InfluxDB",
}
# The oldest Grafana the dashboards' schemaVersion (39) loads in.
GRAFANA_VERSION = "10.3.0"


def exported(board: Json) -> Json:
    """``board`` with its datasource references pointing at the ``__inputs`` entry."""
    body = _rebind(board)
    body.pop("id", None)  # an import assigns its own
    panel_types = sorted(
        {panel["type"] for panel in body.get("panels", []) if panel["type"] != "row"}
    )
    requires = [
        {"type": "grafana", "id": "grafana", "name": "Grafana", "version": GRAFANA_VERSION},
        {"type": "datasource", "id": "influxdb", "name": "InfluxDB", "version": "1.0.0"},
    ] + [{"type": "panel", "id": kind, "name": kind, "version": ""} for kind in panel_types]
    return {"__inputs": [DATASOURCE_INPUT], "__requires": requires, **body}


def _rebind(node: Any) -> Any:
    """A deep copy of ``node`` with every provisioned datasource reference replaced."""
    if isinstance(node, dict):
        if node == DATASOURCE:
            return dict(INPUT_DATASOURCE)
        return {key: _rebind(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_rebind(value) for value in node]
    return node
