"""Each node's clock in a replayed capture, judged from its own lines against the other nodes'.

A capture is written in the order its lines arrived, so the lines near one another were
written at about the same moment. A node whose clock runs 40 s ahead stamps its lines 40 s
later than its neighbours in the file; left alone, a replay's window clock followed those lines
(they agreed with one another) and dropped every other node's as late, or, 40 s behind, counted
the node's own lines late and called the node missing. So before a replay reads a line it
surveys the file's first bytes:

* the surveyed lines are cut into blocks of consecutive lines; in each, every node's median
  stamp is a vote, and a node's deviation is its median less the median of the other nodes'
  votes (one vote a node, however many lines it wrote, so a node cannot outvote the others
  by being a large share of the lines); a block with fewer than ``min_others`` other nodes
  says nothing;
* a node's offset is the median of its deviations over the blocks; it is trusted only when
  they agree (their median absolute deviation within half the tolerance), so a node that
  stamps in the wrong unit, whose deviation grows line by line, is left to the stamp check
  (:mod:`flows.io.stream_clock`), which names that mistake;
* as in the collectors' correction (:mod:`influx.clock_offset`), only an offset known to be
  past ``tolerance_s`` is corrected: a node within it keeps its own stamps.

Every pass of a replay (each process, each byte range) makes the same survey of the same bytes,
so all re-stamp the same lines alike. A node whose clock is off is reported once, as a clock
fault of that node (``node_clock_skew`` in the error stream and the log), never as a hardware
fault.

>>> nodes = np.array([0, 1, 2, 3] * 50)
>>> stamps = np.repeat(np.arange(50), 4) * 10**9
>>> stamps[nodes == 2] += 40 * 10**9  # node c runs 40 s ahead
>>> found = node_offsets(nodes, stamps, ["a", "b", "c", "d"], block_lines=40)
>>> {node: round(e.offset_s) for node, e in found.items()}
{'c': 40}
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

import numpy as np

from reflex_localize.influx.clock_offset import OffsetEstimate

_NS = 1e9
K = TypeVar("K")  # what names a node
_MOST_GROWTH = 16  # how far a block may grow to find its nodes


def node_offsets(
    nodes: np.ndarray,
    stamps: np.ndarray,
    names: Sequence[K],
    *,
    block_lines: int = 2048,
    min_others: int = 3,
    min_blocks: int = 2,
    tolerance_s: float = 5.0,
) -> dict[K, OffsetEstimate]:
    """The nodes whose clock is off by more than ``tolerance_s``: ``names[i]`` for node ``i``
    of ``nodes``, each line's node in file order, beside its stamp."""
    deviations: dict[int, list[int]] = {}
    for begin, end in _blocks(nodes, block_lines, min_others + 1):
        votes = _votes(nodes[begin:end], stamps[begin:end])
        if len(votes) <= min_others:
            continue
        for node, vote in votes.items():
            others = [v for n, v in votes.items() if n != node]
            deviations.setdefault(node, []).append(vote - int(np.median(others)))
    found = {}
    for node, seen in deviations.items():
        if len(seen) < min_blocks:
            continue
        values = np.array(seen, np.float64)
        offset = float(np.median(values))
        spread = float(np.median(np.abs(values - offset)))
        if abs(offset) > tolerance_s * _NS and spread <= tolerance_s * _NS / 2:
            found[names[node]] = OffsetEstimate(offset / _NS, spread / _NS, len(seen))
    return found


def _blocks(nodes: np.ndarray, block_lines: int, min_nodes: int) -> Iterator[tuple[int, int]]:
    """Spans of ``block_lines`` lines, each grown (to at most ``_MOST_GROWTH`` times that) until
    it holds ``min_nodes`` nodes: a capture that lists a node's lines together is still read
    against the nodes around it."""
    begin = 0
    while begin < len(nodes):
        end = begin + block_lines
        while len(np.unique(nodes[begin:end])) < min_nodes and end < len(nodes):
            if end - begin >= _MOST_GROWTH * block_lines:
                break
            end += block_lines
        yield begin, min(end, len(nodes))
        begin = end


def _votes(nodes: np.ndarray, stamps: np.ndarray) -> dict[int, int]:
    """Each node's median stamp in one block."""
    order = np.lexsort((stamps, nodes))
    nodes, stamps = nodes[order], stamps[order]
    firsts = np.flatnonzero(np.r_[True, nodes[1:] != nodes[:-1]])
    ends = np.r_[firsts[1:], len(nodes)]
    return {
        int(nodes[first]): int(stamps[(first + end - 1) // 2])
        for first, end in zip(firsts.tolist(), ends.tolist(), strict=True)
    }
