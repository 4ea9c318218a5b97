"""A rank's steps count only from the node its membership placed it on.

A process on node-0001 sends ``train_step`` rows claiming rank 43 (placed on node-0006), with
``loss=50``, a little before node-0006's GPU falls off the bus: a false silent-data-corruption
warning against node-0006's replica, unless the rows are refused. They are, and counted."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from xid79_capture import xid79_chunks

from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.judge import job_step
from reflex_localize.flows.judge.rank_placement import placed_rows
from reflex_localize.flows.messages import RankInfo, StepRows
from reflex_localize.flows.runner import RunResult, run_in_process

RANK_43 = re.compile(r"^train_step,cluster=sim,job=train,node=node-0006,rank=43 ")


def _spoofed(line: str) -> str:
    """The same step of rank 43, as node-0001 claims it, its loss 50."""
    line = line.replace("node=node-0006", "node=node-0001")
    return re.sub(r"loss=[0-9.]+", "loss=50.0", line)


def _replay(tmp_path: Path) -> RunResult:
    lines = []
    for number, chunk in enumerate(xid79_chunks(360)):
        for line in chunk:
            lines.append(line)
            if 27 <= number <= 29 and RANK_43.match(line):
                lines.append(_spoofed(line))
    capture = tmp_path / "capture.lp"
    capture.write_text("".join(line + "\n" for line in lines))
    return run_in_process(LineProtocolSource(capture, 1, 10.0))


def test_steps_claiming_another_node_s_rank_are_refused_and_counted(tmp_path: Path) -> None:
    result = _replay(tmp_path)
    told = [(e.trigger, e.severity, e.top and (e.top.node, e.top.index)) for e in result.events]
    assert told == [("explicit", "critical", ("node-0006", "3"))]
    refused = [e for e in result.errors if e.reason == "rank_on_other_node"]
    assert refused and all(
        e.detail.startswith("train rank 43 (placed on node-0006)") and "from node-0001" in e.detail
        for e in refused
    )


def test_taken_as_they_come_the_claimed_steps_blamed_a_healthy_replica(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the check changes: the same replay with every step row taken."""
    monkeypatch.setattr(job_step, "placed_rows", lambda job, steps, members: (steps, []))
    triggers = [e.trigger for e in _replay(tmp_path).events]
    assert "loss_divergence" in triggers


def test_a_rank_moved_to_a_spare_counts_from_both_nodes_while_both_records_last() -> None:
    """An elastic restart moves rank 5 to a spare; the old node's record lasts until its shard
    drops it. Rows from either are the rank's; a third node's are not."""
    members = [RankInfo(5, "old", 5, 5, 0, 0, 1, ""), RankInfo(5, "spare", 5, 5, 0, 0, 1, "")]
    nodes = np.array(["old", "spare", "other"], dtype=object)
    steps = StepRows(
        rank=np.array([5, 5, 5]), step=np.arange(3), step_time=np.ones(3), compute=np.ones(3),
        comm=np.ones(3), time_ns=np.arange(3), checkpoint=np.ones(3), loss=np.ones(3), node=nodes,
    )  # fmt: skip
    kept, refused = placed_rows("j", steps, members)
    assert kept.node.tolist() == ["old", "spare"]
    assert [r.detail for r in refused] == [
        "j rank 5 (placed on old, spare): 1 step rows from other"
    ]
