"""The independent test bed (testbed/) writes what Reflex's schema accepts, with consistent
labels. Detector results are not asserted here: the test bed is the measuring stick."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import itertools

from reflex_localize.schemas.codec import PointError, decode
from reflex_localize.schemas.contract import load_schema
from testbed.generate import generate

SITE_TAGS = {"rack", "switch", "pod"}
HOOK_MEASUREMENTS = {"train_step", "job_membership"}


@pytest.fixture(scope="module", params=[("hgx_ndr", 10, 0.3), ("aisle_hdr", 10, 0.15),
                                        ("site_roce", 8, 0.1)])  # fmt: skip
def fleet(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    name, nodes, hours = request.param
    out = tmp_path_factory.mktemp(name)
    lp_path, label_path, labels = generate(name, 3, out, hours=hours, nodes=nodes)
    return lp_path, label_path, labels


def test_every_line_decodes_against_the_schema(fleet) -> None:
    lp_path, _, labels = fleet
    schema = load_schema()
    seen: set[str] = set()
    stamps = []
    for number, line in enumerate(lp_path.read_text().splitlines(), 1):
        try:
            point = decode(line, schema, carry_tags=True)
        except PointError as error:  # pragma: no cover - the message is the point
            raise AssertionError(f"line {number}: {error}: {line[:200]}") from None
        declared = set(schema.measurement(point.measurement).tags)
        extra = set(point.tags) - declared
        assert extra <= SITE_TAGS, (number, extra)
        if point.measurement in HOOK_MEASUREMENTS:
            decode(line, schema)  # what the hook writes carries no site tag at all
        if point.measurement == "event" and point.tags["source"] == "training":
            assert {"job", "rank", "message"} <= set(point.fields)
        assert point.tags["cluster"] == labels["cluster"]
        assert point.tags["node"] in labels["nodes"]
        seen.add(point.measurement)
        stamps.append(point.time_ns)
    assert {"gpu", "nic", "ib_port", "train_step", "job_membership"} <= seen
    assert ("host" in seen) == labels["telemetry"]["host"]
    assert ("gpu_topology" in seen) == labels["telemetry"]["gpu_topology"]
    # a capture in time order, up to the nodes' clock skews (at most ~2 s)
    assert all(b >= a - 3 * 10**9 for a, b in itertools.pairwise(stamps))
    start, end = labels["start_ns"], labels["start_ns"] + labels["duration_s"] * 1e9
    assert start - 3e9 <= min(stamps) and max(stamps) <= end + 3e9


def test_labels_are_consistent(fleet) -> None:
    _, label_path, labels = fleet
    assert json.loads(label_path.read_text()) == labels
    nodes = set(labels["nodes"])
    assert labels["node_hours"] == pytest.approx(len(nodes) * labels["duration_s"] / 3600)
    assert 0 < labels["benign_node_hours"] <= labels["node_hours"]
    for fault in labels["faults"]:
        assert fault["node"] in nodes and fault["right"]["node"] == fault["node"]
        assert 0 <= fault["start_s"] < fault["end_s"] <= labels["duration_s"]
        assert fault["component"] in ("gpu", "nic", "host")
        assert any(p["component"] in (fault["component"], "node") for p in fault["right"]["parts"])
        assert fault["source"]
        # the faulty node runs a job when its fault begins
        assert any(
            fault["node"] in seg["nodes"] and seg["start_s"] <= fault["start_s"] < seg["end_s"]
            for job in labels["jobs"]
            for seg in job["segments"]
        )
    for benign in labels["benign"]:
        assert benign["hardware_fault"] is False
        assert set(benign["nodes"]) <= nodes and benign["start_s"] <= benign["end_s"]
    for job in labels["jobs"]:
        for seg in job["segments"]:
            assert set(seg["nodes"]) <= nodes and seg["start_s"] < seg["end_s"]
