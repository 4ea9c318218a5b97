"""A flow reads one cluster: the one it is told, or the first named one its telemetry shows.
Rows of other clusters are counted every window and told once, never merged into this one's
nodes (the same host name in two clusters is not one node). The whole-flow try, an XID 79 in
one of two clusters of the same node names, is tests/test_adversarial_tries.py's."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from reflex_localize.flows.io.one_cluster import UNNAMED, OneCluster, first_cluster
from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.runner import run_in_process
from reflex_localize.influx.config import Identity
from reflex_localize.schemas.codec import Point
from reflex_localize.schemas.foreign_translate import ForeignTranslator
from reflex_localize.schemas.frame import Frame
from reflex_localize.shell.flow import command as flow_command
from reflex_localize.shell.flow_cluster import chosen_cluster, cluster_parameters

T0 = 1767225600000000000
TELEGRAF = "nvidia_smi,host=gpu-7,index=3,name=NVIDIA\\ H100\\ 80GB\\ HBM3 temperature_gpu=40i"


def _frame(clusters: list[str]) -> Frame:
    column = np.array(clusters, dtype=object)
    nodes = np.array([f"n{i}" for i in range(len(clusters))], dtype=object)
    return Frame(
        "host", np.arange(len(clusters)), {"cluster": column, "node": nodes},
        {"load1": np.ones(len(clusters))},
    )  # fmt: skip


def test_a_told_cluster_keeps_its_rows_and_the_unnamed_ones() -> None:
    one = OneCluster("b")
    kept, aside = one.keep([_frame(["a", "b", UNNAMED, "a"]), _frame(["a"])])
    assert [frame.tags["node"].tolist() for frame in kept] == [["n1", "n2"]]
    assert aside == Counter({"a": 3})
    assert one.cluster == "b"


def test_untold_the_first_named_cluster_is_followed_and_the_results_carry_it() -> None:
    followed: list[str] = []
    one = OneCluster(None, followed.append)
    kept, aside = one.keep([_frame([UNNAMED]), _frame(["c", "d", "c"]), _frame(["d"])])
    assert [len(frame) for frame in kept] == [1, 2] and aside == Counter({"d": 2})
    assert followed == ["c"]
    one.keep([_frame(["d", "c"])])
    assert followed == ["c"]


def test_each_other_cluster_is_told_once_with_the_option_that_reads_it() -> None:
    one = OneCluster("a")
    first = one.tell(Counter({"b": 3, "c": 1}))
    assert [(r.where, r.reason) for r in first] == [("source", "other_cluster")] * 2
    assert first[0].detail == (
        "lines of cluster b ignored: this flow reads cluster a; pass --cluster b to read them"
    )
    assert one.tell(Counter({"b": 9})) == []


def test_unnamed_is_what_an_untold_agent_and_untagged_foreign_data_are_tagged() -> None:
    assert Identity().cluster == UNNAMED
    assert ForeignTranslator().cluster == UNNAMED


def _capture(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_a_files_first_cluster_is_its_first_named_one(tmp_path: Path) -> None:
    escaped = f"host,cluster=x\\ y,node=n1 load1=1 {T0}"  # only decoding reads its cluster
    named = _capture(tmp_path / "named.lp", [
        "# a comment", f"{TELEGRAF} {T0}", f"host,cluster={UNNAMED},node=n1 load1=1 {T0}",
        "not line protocol", escaped, f"host,cluster=a,node=n1 load1=1 {T0}",
    ])  # fmt: skip
    assert first_cluster(named) == "x y"
    unnamed = _capture(tmp_path / "unnamed.lp", [f"{TELEGRAF} {T0}"])
    assert first_cluster(unnamed) == UNNAMED
    assert first_cluster(_capture(tmp_path / "none.lp", ["# nothing", "garbage"])) is None
    late = [f"{TELEGRAF} {T0}"] * 3 + [f"host,cluster=a,node=n load1=1 {T0}"]
    late_path = _capture(tmp_path / "late.lp", late)
    assert first_cluster(late_path) == "a"
    assert first_cluster(late_path, head_lines=3) == UNNAMED


def _two_clusters(path: Path) -> Path:
    lines = []
    for step in range(12):
        stamp = T0 + step * 5 * 10**9
        lines += [
            f"host,cluster={c},node=node-{n} load1=0.5 {stamp}" for c in "ab" for n in range(3)
        ]
    return _capture(path, lines)


def test_a_run_counts_the_other_clusters_lines_and_tells_them_once(tmp_path: Path) -> None:
    ignored: list[Point] = []

    def collect(route: str, item: Any) -> None:
        if route == "points":
            ignored.extend(p for p in item if p.tags.get("where") == "ignored")

    source = LineProtocolSource(_two_clusters(tmp_path / "two.lp"), 2, 10.0)
    result = run_in_process(source, on_output=collect)
    assert sum(int(p.fields["records"]) for p in ignored) == 36  # all of b's
    assert {(p.tags["cluster"], p.tags["reason"]) for p in ignored} == {("a", "other_cluster")}
    assert [e.detail for e in result.errors] == [
        "lines of cluster b ignored: this flow reads cluster a; pass --cluster b to read them"
    ]


@pytest.mark.parametrize(
    "given, saved, source, chosen",
    [
        ("b", "a", "sim:demo", "b"),  # told: that one (the recovery guard judges the change)
        (None, "a", "sim:demo", "a"),  # a restart follows the cluster it was made with
        (None, None, "sim:demo", "sim"),  # the scenario's
        (None, UNNAMED, "sim:demo", "sim"),  # saved by a flow that read every cluster
        (None, None, "influx", None),  # a live source's first: the flow follows it
    ],
)
def test_the_cluster_is_chosen_before_any_process_starts(
    given: str | None, saved: str | None, source: str, chosen: str | None
) -> None:
    assert chosen_cluster(given, source, saved) == chosen


def test_the_recovery_keeps_a_chosen_cluster_but_not_one_saved_unnamed() -> None:
    assert cluster_parameters("a", None) == {"cluster": "a"}
    assert cluster_parameters("a", "a") == {"cluster": "a"}
    assert cluster_parameters("a", UNNAMED) == {}
    assert cluster_parameters(None, None) == {}


def test_a_live_flow_of_several_processes_must_be_told_its_cluster(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["--source", "influx", "--sink", "files", "--out", str(tmp_path), "-p", "2"]
    refused = runner.invoke(flow_command, args)
    assert refused.exit_code == 2
    assert "--source influx read by several processes needs --cluster NAME" in refused.output
