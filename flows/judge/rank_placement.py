"""A rank's training steps come from the node its membership placed it on, or not at all.

Any process on a node can write to its agent's hook, and a line-protocol file or a push
stream can carry anything: one ``train_step`` claiming another node's rank, with ``loss=50``,
raised a false corruption warning against that node. So a step row whose job has placed ranks
on the row's node, but not this rank, is refused: counted and reported once a window per job,
node and rank, never evidence. A node with no membership for the job (a hook that sends no
membership) is not judged this way: nothing says where its ranks are.

>>> import numpy as np
>>> from reflex_localize.flows.messages import RankInfo
>>> from reflex_localize.schemas.frame import Frame
>>> members = {"j": {r: RankInfo(r, n, 0, r, 0, 0, 1, "") for r, n in ((0, "n1"), (1, "n2"))}}
>>> steps = Frame("train_step", np.arange(3), {"job": np.array(["j"] * 3, dtype=object),
...     "node": np.array(["n1", "n1", "n3"], dtype=object),
...     "rank": np.array(["0", "1", "1"], dtype=object)}, {"step": np.arange(3)})
>>> kept, refused = placed_steps([steps], members)
>>> len(kept[0]), [r.detail for r in refused]
(2, ['j rank 1: 1 step rows from n1, where the job placed ranks 0, not it'])
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from reflex_localize.flows.messages import ErrorRecord, RankInfo
from reflex_localize.schemas.frame import Frame

REASON = "rank_on_other_node"


def placed_steps(
    frames: list[Frame], members: dict[str, dict[int, RankInfo]]
) -> tuple[list[Frame], list[ErrorRecord]]:
    """The step frames without rows of ranks placed elsewhere, and one error record per
    (job, node, rank) refused in them."""
    on_node: dict[tuple[str, str], set[int]] = {}
    for job, ranks in members.items():
        for rank, info in ranks.items():
            on_node.setdefault((job, info.node), set()).add(rank)
    if not on_node:
        return frames, []
    kept, refused = [], Counter[tuple[str, str, int]]()
    for frame in frames:
        if not {"job", "node", "rank"} <= frame.tags.keys():
            kept.append(frame)
            continue
        ok = np.ones(len(frame), dtype=bool)
        rows = zip(
            frame.tags["job"].tolist(),
            frame.tags["node"].tolist(),
            frame.tags["rank"].tolist(),
            strict=True,
        )
        for i, (job, node, rank) in enumerate(rows):
            placed = on_node.get((job, node))
            if placed is not None and _rank(rank) not in placed:
                ok[i] = False
                refused[(job, node, _rank(rank))] += 1
        kept.append(frame if ok.all() else frame.take(ok))
    errors = [
        ErrorRecord(
            "membership",
            REASON,
            f"{job} rank {rank}: {count} step rows from {node}, where the job placed ranks "
            f"{_spans(on_node[(job, node)])}, not it",
        )
        for (job, node, rank), count in sorted(refused.items())
    ]
    return kept, errors


def _rank(text: object) -> int:
    try:
        return int(str(text))
    except ValueError:
        return -1


def _spans(ranks: set[int]) -> str:
    return ", ".join(map(str, sorted(ranks)[:8])) + (", ..." if len(ranks) > 8 else "")
