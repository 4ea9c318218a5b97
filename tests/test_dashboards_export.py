"""The dashboards' export form (``dashboards/grafana_export/``) asks for its datasource on import:
it declares one ``__inputs`` datasource and every reference points at it; it is generated from
the same builders as the provisioned form and differs from it only there."""

from __future__ import annotations

import json
from typing import Any

import pytest
from grafana_queries import GRAFANA_DIR

from reflex_localize.dashboards.generate import BUILDERS, EXPORT_DIR
from reflex_localize.dashboards.grafana_export import INPUT_DATASOURCE, INPUT_NAME
from reflex_localize.dashboards.grafana_model import DATASOURCE

EXPORTS = {path.stem: json.loads(path.read_text()) for path in sorted(EXPORT_DIR.glob("*.json"))}


def _datasources(node: Any) -> list[Any]:
    if isinstance(node, dict):
        found = [node["datasource"]] if "datasource" in node else []
        return found + [ds for value in node.values() for ds in _datasources(value)]
    if isinstance(node, list):
        return [ds for value in node for ds in _datasources(value)]
    return []


def test_every_dashboard_has_an_export() -> None:
    assert set(EXPORTS) == set(BUILDERS)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_panel_target_variable_and_annotation_uses_the_input(name: str) -> None:
    board = EXPORTS[name]
    assert [item["name"] for item in board["__inputs"]] == [INPUT_NAME]
    assert board["__inputs"][0]["type"] == "datasource"
    assert board["__inputs"][0]["pluginId"] == "influxdb"
    for panel in board["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == INPUT_DATASOURCE, panel["title"]
            for target in panel["targets"]:
                assert target["datasource"] == INPUT_DATASOURCE, panel["title"]
    used = _datasources(board)
    assert used and all(ds == INPUT_DATASOURCE for ds in used)
    assert "reflex-influxdb" not in json.dumps(board)  # no pinned uid left anywhere
    assert "id" not in board


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_the_export_is_the_provisioned_board_with_the_input(name: str) -> None:
    provisioned = json.loads((GRAFANA_DIR / f"{name}.json").read_text())
    text = json.dumps(EXPORTS[name], sort_keys=True)
    text = text.replace(json.dumps(INPUT_DATASOURCE, sort_keys=True),
                        json.dumps(DATASOURCE, sort_keys=True))  # fmt: skip
    back = json.loads(text)
    assert {key for key in back if key.startswith("__")} == {"__inputs", "__requires"}
    for key in ("__inputs", "__requires"):
        back.pop(key)
    provisioned.pop("id", None)
    assert back == provisioned


def test_requires_lists_the_panel_types_used() -> None:
    for board in EXPORTS.values():
        panels = {p["type"] for p in board["panels"] if p["type"] != "row"}
        required = {r["id"] for r in board["__requires"] if r["type"] == "panel"}
        assert required == panels
