"""A rank's training steps count only from the node its membership placed it on.

Any process on a node can write to its agent's hook, and a line-protocol file or a push
stream can carry anything: one ``train_step`` claiming another node's rank, with ``loss=50``,
raised a false corruption warning against that rank's replica. So a step row from a node
other than its rank's is refused: counted and reported once a window per rank and node, never
evidence. A rank whose membership is not known (a hook that sends none, a membership line
lost) is not judged this way: nothing says where it runs.

>>> import numpy as np
>>> from reflex_localize.flows.messages import RankInfo, StepRows
>>> members = {r: RankInfo(r, n, 0, r, 0, 0, 1, "") for r, n in ((0, "n1"), (1, "n2"))}
>>> steps = StepRows(rank=np.array([0, 1, 1, 2]), step=np.arange(4), step_time=np.ones(4),
...     compute=np.ones(4), comm=np.ones(4), time_ns=np.arange(4), checkpoint=np.ones(4),
...     loss=np.ones(4), node=np.array(["n1", "n2", "n1", "n1"], dtype=object))
>>> kept, refused = placed_rows("j", steps, members.values())
>>> kept.rank.tolist(), [r.detail for r in refused]
([0, 1, 2], ['j rank 1 (placed on n2): 1 step rows from n1'])
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable

import numpy as np

from reflex_localize.flows.messages import ErrorRecord, RankInfo, StepRows

REASON = "rank_on_other_node"


def placed_rows(
    job: str, steps: StepRows, members: Iterable[RankInfo]
) -> tuple[StepRows, list[ErrorRecord]]:
    """The rows whose node a membership record places their rank on (or whose rank no record
    places), and one error record per rank and node whose rows were refused. ``members``: every
    membership record the job's shards hold, so a rank that moved to a spare (an elastic
    restart) is placed on both nodes while the old one's record lasts."""
    nodes = steps.node
    placed: dict[int, set[str]] = {}
    for info in members:
        placed.setdefault(info.rank, set()).add(info.node)
    if not placed or len(nodes) != len(steps.rank) or not len(nodes):
        return steps, []  # no membership, or rows from before the node column
    pairs = list(zip(steps.rank.tolist(), nodes.tolist(), strict=True))
    wrong = np.array(
        [rank in placed and node != "" and node not in placed[rank] for rank, node in pairs],
        dtype=bool,
    )
    if not wrong.any():
        return steps, []
    refused = Counter(pair for pair, bad in zip(pairs, wrong.tolist(), strict=True) if bad)
    errors = [
        ErrorRecord(
            "membership",
            REASON,
            f"{job} rank {rank} (placed on {', '.join(sorted(placed[rank]))}): {count} step "
            f"rows from {node}",
        )
        for (rank, node), count in sorted(refused.items())
    ]
    kept = {f.name: getattr(steps, f.name)[~wrong] for f in dataclasses.fields(steps)}
    return StepRows(**kept), errors
