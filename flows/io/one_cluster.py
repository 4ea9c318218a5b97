"""One cluster per flow: rows of another cluster are set aside, counted, and told once.

Downstream of the source a node is its name alone (its shard, baselines, records, a job's
members), so two clusters in one source would merge: the same host name in both would be one
node, one cluster's XID judged against the other's GPUs. A flow therefore reads one cluster:
the one it is told (``reflex flow --cluster``), or else the first named cluster its telemetry
shows. Every other cluster's rows are set aside before the shard step: counted per window as
``reflex_rejects`` points (``where=ignored``, ``reason=other_cluster``), and told once per
process, in the error stream and the log, with the option that reads them. One flow runs per
cluster.

Telemetry that never named a cluster is read by every flow: it is tagged :data:`UNNAMED` (an
agent or training hook not told its cluster; foreign data without a cluster tag, which the
translator tags so, ``schemas/foreign/tags.csv``).

>>> import numpy as np
>>> from reflex_localize.schemas.frame import Frame
>>> rows = np.array(["a", "b", "default"], dtype=object)
>>> frame = Frame("host", np.arange(3), {"cluster": rows, "node": rows}, {"load1": np.ones(3)})
>>> one = OneCluster(None)
>>> kept, aside = one.keep([frame])
>>> one.cluster, kept[0].tags["node"].tolist(), dict(aside)
('a', ['a', 'default'], {'b': 1})
>>> [record.detail for record in one.tell(aside)]
['lines of cluster b ignored: this flow reads cluster a; pass --cluster b to read them']
>>> one.tell(aside)
[]
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from reflex_localize.flows.messages import ErrorRecord
from reflex_localize.schemas.foreign_translate import ForeignTranslator
from reflex_localize.schemas.frame import Frame
from reflex_localize.schemas.line_file import data_lines, raw_tag

UNNAMED = "default"
REASON = "other_cluster"
HEAD_LINES = 1024  # data lines a file's first named cluster is looked for in

_log = logging.getLogger(__name__)


class OneCluster:
    """Keeps the rows of one cluster (``cluster``; None: the first named one seen, after which
    ``on_follow`` is told its name). Shared by the shard steps of one process."""

    def __init__(
        self, cluster: str | None, on_follow: Callable[[str], None] = lambda name: None
    ) -> None:
        self.cluster = cluster
        self._on_follow = on_follow
        self._told: set[str] = set()
        self._lock = threading.Lock()  # -w N: the workers of a process share this

    def keep(self, frames: list[Frame]) -> tuple[list[Frame], Counter[str]]:
        """The rows of ``frames`` this flow reads, and the count of rows set aside by cluster."""
        aside: Counter[str] = Counter()
        kept = []
        for frame in frames:
            column = frame.tags.get("cluster")
            if column is None or not len(frame):
                kept.append(frame)  # no cluster column: nothing to tell apart (validation refuses)
                continue
            cluster = self._followed(column)
            mine = (column == cluster) | (column == UNNAMED)
            if mine.all():
                kept.append(frame)
                continue
            others, counts = np.unique(column[~mine].astype(str), return_counts=True)
            aside.update(dict(zip(others.tolist(), counts.tolist(), strict=True)))
            if mine.any():
                kept.append(frame.take(mine))
        return kept, aside

    def tell(self, aside: Counter[str]) -> list[ErrorRecord]:
        """One record, and one log line, for each cluster set aside for the first time here."""
        new = []
        with self._lock:
            for other in sorted(set(aside) - self._told):
                self._told.add(other)
                new.append(other)
        records = []
        for other in new:
            detail = (
                f"lines of cluster {other} ignored: this flow reads cluster {self.cluster}; "
                f"pass --cluster {other} to read them"
            )
            _log.warning("%s", detail)
            records.append(ErrorRecord("source", REASON, detail[:300]))
        return records

    def _followed(self, column: np.ndarray) -> str:
        if self.cluster is not None:
            return self.cluster
        named = column[column != UNNAMED]
        if not len(named):
            return UNNAMED  # nothing named yet: keep the unnamed rows, follow none
        with self._lock:
            if self.cluster is None:
                self.cluster = str(named[0])
                self._on_follow(self.cluster)
        return self.cluster


def first_cluster(path: Path, head_lines: int = HEAD_LINES) -> str | None:
    """The first named cluster of a line-protocol file's first ``head_lines`` data lines;
    :data:`UNNAMED` when they name none; None when none of them is telemetry. Every process
    of a flow reads the same head, so all follow the same cluster."""
    translator = ForeignTranslator()
    seen_any = False
    for number, (_, line) in enumerate(data_lines(path, 1 << 20)):
        if number >= head_lines:
            break
        cluster = raw_tag(line, "cluster") if translator.is_reflex_line(line) else None
        if cluster is None:
            cluster = _decoded_cluster(translator, line)
        if cluster is None:
            continue
        if cluster != UNNAMED:
            return cluster
        seen_any = True
    return UNNAMED if seen_any else None


def _decoded_cluster(translator: ForeignTranslator, line: str) -> str | None:
    """The cluster of a line whose head cannot be read raw (escapes, foreign data)."""
    try:
        points, _ = translator.decode(line)
    except Exception:  # a broken line: the replay counts it
        return None
    return str(points[0].tags.get("cluster") or "") or None if points else None
