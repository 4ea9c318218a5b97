"""The clock survey of a replayed file: which nodes' clocks are off, and their lines re-stamped.

A replay surveys its file's first ``survey_bytes`` (:func:`survey_clocks`) before it reads a
line: each line's node and stamp, judged by :func:`~flows.io.node_clocks.node_offsets`. Every
piece the replay then reads goes through :meth:`NodeClocks.restamp`, which moves the stamp of
each line of a node whose clock is off by that node's offset, in the text itself: the window
clock, the stamp checks and the decoder all read the one corrected stamp. The survey reads the
same bytes in every process and every byte range of a replay, so all correct the same lines.

A line's node is read off its head without decoding (:func:`clock_node`): the ``node`` tag, or
the tag a foreign collector names its node by (dcgm-exporter's ``Hostname``, Telegraf's
``host``), with its ``cluster`` (two clusters may name nodes alike); a line whose head holds
escapes is left as it is.

>>> clocks = NodeClocks({("", "n2"): OffsetEstimate(40.0, 0.0, 12)}, nodes_seen=3)
>>> lines = ["host,node=n1 load1=1 1000000000000", "host,node=n2 load1=1 41000000000"]
>>> clocks.restamp(lines, "\\n".join(lines).encode())[0][1]
'host,node=n2 load1=1 1000000000'
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from reflex_localize.flows.io.byte_ranges import line_start
from reflex_localize.flows.io.node_clocks import node_offsets
from reflex_localize.flows.messages import ErrorRecord
from reflex_localize.influx.clock_offset import OffsetEstimate
from reflex_localize.schemas.line_file import Bytes, PieceLines, data_pieces, raw_tag

_log = logging.getLogger(__name__)
_NODE_TAGS = ("node", "Hostname", "host")  # Reflex's, then dcgm-exporter's, then Telegraf's
_MOST_STAMP_DIGITS = 19  # a stamp below 2**63
Node = tuple[str, str]  # (cluster, node): "" where the line names no cluster


def clock_node(line: str) -> Node | None:
    """The node whose clock stamped ``line``, read off its head; None when it cannot be."""
    for tag in _NODE_TAGS:
        node = raw_tag(line, tag)
        if node is not None:
            return raw_tag(line, "cluster") or "", node
    return None


@dataclass(frozen=True)
class NodeClocks:
    """The nodes whose clocks a survey found off (their offsets: theirs less the others'), and
    how many nodes it saw."""

    offsets: dict[Node, OffsetEstimate]
    nodes_seen: int
    _heads: dict[str, Node | None] = field(default_factory=dict, compare=False, repr=False)

    @property
    def jump_nodes(self) -> int:
        """How many nodes' lines must agree before a replay's clock follows a jump: three, or
        every node where the survey saw fewer (a capture of one node can only follow it)."""
        return max(1, min(3, self.nodes_seen))

    def restamp(self, lines: Sequence[str], raw: Bytes) -> tuple[Sequence[str], Bytes]:
        """A piece (``lines`` and ``raw``, their bytes: see :func:`schemas.line_file.data_pieces`)
        with the stamps of the off nodes' lines corrected."""
        places = self._places(bytes(raw)) if self.offsets else []
        if not places:
            return lines, raw
        changed = list(lines)
        rows = np.unique(np.searchsorted(PieceLines.of(lines, raw).ends, places))
        for row in rows.tolist():
            node = self._node(changed[row])
            estimate = self.offsets.get(node) if node is not None else None
            if estimate is not None:
                changed[row] = _shifted(changed[row], -round(estimate.offset_s * 1e9))
        return changed, "\n".join(changed).encode("utf-8", "surrogatepass")

    def tell(self, counted: Callable[[str], bool]) -> list[ErrorRecord]:
        """One clock fault per off node that ``counted`` says is this pass's to tell: for the
        error stream, and logged (a reject table counts it, without the node's name)."""
        out = []
        for (cluster, node), estimate in sorted(self.offsets.items()):
            if not counted(node):
                continue
            way = "ahead of" if estimate.offset_s > 0 else "behind"
            named = f"node {node}" + (f" of cluster {cluster}" if cluster else "")
            detail = (
                f"{named}: its clock runs {abs(estimate.offset_s):,.1f} s {way} the other "
                f"nodes' (within {estimate.error_s:,.1f} s over {estimate.samples} blocks of "
                f"lines); its lines are re-stamped by {-estimate.offset_s:+,.1f} s"
            )
            out.append(ErrorRecord("source", "node_clock_skew", detail))
            _log.warning("%s", detail)
        return out

    def _places(self, raw: bytes) -> list[int]:
        """Where the piece's bytes name an off node (the heads of those lines are read after)."""
        places = []
        for _, node in self.offsets:
            needle = f"={node}".encode()
            at = raw.find(needle)
            while at >= 0:
                places.append(at)
                at = raw.find(needle, at + len(needle))
        return places

    def _node(self, line: str) -> Node | None:
        head = line.partition(" ")[0]
        if head not in self._heads:
            if len(self._heads) > _MOST_HEADS:
                self._heads.clear()
            self._heads[head] = clock_node(line)
        return self._heads[head]


_MOST_HEADS = 1 << 16  # heads whose node a survey remembers


def _shifted(line: str, shift_ns: int) -> str:
    """``line`` with its plain stamp moved by ``shift_ns``; as it was when it has none."""
    cut = line.rfind(" ")
    stamp = line[cut + 1 :]
    if cut < 0 or not (stamp.isascii() and stamp.isdigit()) or len(stamp) > _MOST_STAMP_DIGITS:
        return line
    moved = int(stamp) + shift_ns
    return f"{line[: cut + 1]}{moved}" if 0 <= moved < 1 << 63 else line


def survey_clocks(path: Path, survey_bytes: int, tolerance_s: float) -> NodeClocks:
    """The nodes whose clocks are off by more than ``tolerance_s``, from the first
    ``survey_bytes`` of the file at ``path`` (whole lines)."""
    end = line_start(path, survey_bytes)
    span = None if end >= path.stat().st_size else (0, end)
    index: dict[Node, int] = {}
    by_head: dict[str, int] = {}
    known: dict[str, int] = {}  # a head's node index, for the pieces after
    nodes: list[np.ndarray] = []
    stamps: list[np.ndarray] = []
    for _, lines, raw in data_pieces(path, 1 << 20, span=span, lazy=True):
        piece = PieceLines.of(lines, raw)
        # A node is read off a line's head alone, so once per distinct head of the survey.
        codes, heads = piece.heads()
        of_head = np.array(
            [known[h] if h in known else known.setdefault(h, _node_index(h, by_head, index))
             for h in heads], np.int64,
        )  # fmt: skip
        piece_nodes = of_head[codes] if heads else np.zeros(len(codes), np.int64)
        piece_stamps = piece.plain_stamps()
        keep = (piece_nodes >= 0) & (piece_stamps >= 0)
        nodes.append(piece_nodes[keep])
        stamps.append(piece_stamps[keep])
    if not nodes:
        return NodeClocks({}, 0)
    found = node_offsets(
        np.concatenate(nodes), np.concatenate(stamps), list(index), tolerance_s=tolerance_s
    )
    return NodeClocks(found, len(index))


def _node_index(line: str, by_head: dict[str, int], index: dict[Node, int]) -> int:
    """The number of the line's node in ``index`` (-1: none read), remembered by head."""
    head = line.partition(" ")[0]
    found = by_head.get(head)
    if found is None:
        node = clock_node(line)
        found = -1 if node is None else index.setdefault(node, len(index))
        if len(by_head) < _MOST_HEADS:
            by_head[head] = found
    return found
