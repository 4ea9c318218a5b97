"""The Grafana JSON is sound: generated, unique ids, the provisioned datasource, no overlapping
panels, panel types Grafana knows, variables that exist, and names the schema declares."""

from __future__ import annotations

import re
from typing import Any

import pytest
from grafana_queries import GRAFANA_DIR, all_queries, dashboards

from reflex_localize.dashboards.generate import stale_files
from reflex_localize.dashboards.grafana_model import DATASOURCE_UID
from reflex_localize.dashboards.schema_check import check_queries

# Panel types of Grafana 10/11's core plugins.
GRAFANA_PANEL_TYPES = {
    "alertlist", "annolist", "barchart", "bargauge", "candlestick", "canvas", "dashlist",
    "flamegraph", "gauge", "geomap", "heatmap", "histogram", "logs", "news", "nodeGraph",
    "piechart", "row", "stat", "state-timeline", "status-history", "table", "text",
    "timeseries", "traces", "trend", "xychart",
}  # fmt: skip
BOARDS = dashboards()
_USED_VARIABLE = re.compile(r"\$\{(\w+)")


def test_the_checked_in_json_is_what_the_generator_writes() -> None:
    assert stale_files() == [], "run: python -m reflex_localize.dashboards.generate"
    assert set(BOARDS) == {"fleet-overview", "job-view", "node-drilldown", "gpu-nic-errors"}


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_panel_ids_and_dashboard_uid_are_unique(name: str) -> None:
    ids = [panel["id"] for panel in BOARDS[name]["panels"]]
    assert len(ids) == len(set(ids))
    assert all(isinstance(panel_id, int) and panel_id > 0 for panel_id in ids)


def test_dashboard_uids_are_unique() -> None:
    uids = [board["uid"] for board in BOARDS.values()]
    assert len(uids) == len(set(uids))


def _datasources(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        found = [node["datasource"]] if "datasource" in node else []
        return found + [ds for value in node.values() for ds in _datasources(value)]
    if isinstance(node, list):
        return [ds for value in node for ds in _datasources(value)]
    return []


def _provisioned_uid() -> str:
    text = (GRAFANA_DIR / "provisioning" / "datasources" / "reflex.yaml").read_text()
    uids = re.findall(r"^\s+uid:\s*(\S+)\s*$", text, re.MULTILINE)
    assert len(uids) == 1, uids
    return uids[0]


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_datasource_is_the_provisioned_one(name: str) -> None:
    assert _provisioned_uid() == DATASOURCE_UID
    used = _datasources(BOARDS[name])
    assert used, "no datasource at all"
    assert all(ds == {"type": "influxdb", "uid": DATASOURCE_UID} for ds in used), used


def test_the_dashboard_provider_points_at_a_folder() -> None:
    text = (GRAFANA_DIR / "provisioning" / "dashboards" / "reflex.yaml").read_text()
    assert re.search(r"^\s+type: file$", text, re.MULTILINE)
    assert re.search(r"^\s+path: /\S+$", text, re.MULTILINE)


def _cells(panel: dict[str, Any]) -> set[tuple[int, int]]:
    pos = panel["gridPos"]
    columns = range(pos["x"], pos["x"] + pos["w"])
    return {(x, y) for x in columns for y in range(pos["y"], pos["y"] + pos["h"])}


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_grid_positions_fit_and_do_not_overlap(name: str) -> None:
    taken: dict[tuple[int, int], str] = {}
    for panel in BOARDS[name]["panels"]:
        pos = panel["gridPos"]
        assert pos["w"] > 0 and pos["h"] > 0 and pos["x"] >= 0 and pos["y"] >= 0
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        for cell in _cells(panel):
            assert cell not in taken, f"{panel['title']!r} overlaps {taken[cell]!r}"
            taken[cell] = panel["title"]


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_panels_are_known_to_grafana_and_described(name: str) -> None:
    for panel in BOARDS[name]["panels"]:
        assert panel["type"] in GRAFANA_PANEL_TYPES, panel["type"]
        assert panel["title"]
        if panel["type"] != "row":
            assert panel["description"], panel["title"]
            assert panel["targets"], panel["title"]
            assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_queries_use_only_defined_variables_and_grafana_macros(name: str) -> None:
    board = BOARDS[name]
    defined = {variable["name"] for variable in board["templating"]["list"]}
    for query in all_queries():
        if query.dashboard != name:
            continue
        assert set(_USED_VARIABLE.findall(query.flux)) <= defined, query.where
        assert "v.timeRangeStart" in query.flux and "v.timeRangeStop" in query.flux, query.where


def test_every_dashboard_has_the_event_annotation_and_a_cluster_variable() -> None:
    for board in BOARDS.values():
        assert [a["name"] for a in board["annotations"]["list"]] == ["Localization events"]
        names = [variable["name"] for variable in board["templating"]["list"]]
        assert "cluster" in names
        assert {"telemetry_bucket", "results_bucket"} <= set(names)


def test_every_dashboard_query_names_only_declared_measurements_and_fields() -> None:
    assert check_queries((query.where, query.flux) for query in all_queries()) == []


def test_repeated_panels_repeat_over_a_multi_value_variable() -> None:
    for board in BOARDS.values():
        multi = {v["name"] for v in board["templating"]["list"] if v.get("multi")}
        for panel in board["panels"]:
            if "repeat" in panel:
                assert panel["repeat"] in multi
