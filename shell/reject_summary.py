"""The table of what a run rejected, by where and fixed reason code: printed at the end of
``reflex localize`` and of a ``reflex flow`` run that ends.

>>> import os
>>> from collections import Counter
>>> from rich.console import Console
>>> console = Console(width=80, record=True, file=open(os.devnull, "w"))
>>> console.print(reject_table(Counter({("source", "late"): 3})))
>>> "│ source │ late   │       3 │" in console.export_text()
True
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from rich.table import Table

from reflex_localize.flows.messages import ErrorRecord


def reject_counts(errors: list[ErrorRecord]) -> Counter[tuple[str, str]]:
    return Counter((error.where, error.reason) for error in errors)


def read_reject_counts(path: Path) -> Counter[tuple[str, str]]:
    """Counts of an ``errors.jsonl`` the flow wrote; a line it cannot read counts as such."""
    counts: Counter[tuple[str, str]] = Counter()
    if not path.exists():
        return counts
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
            counts[(str(record["where"]), str(record["reason"]))] += 1
        except (ValueError, KeyError, TypeError):
            counts[("errors.jsonl", "unreadable_line")] += 1
    return counts


def reject_table(counts: Counter[tuple[str, str]]) -> Table:
    table = Table(title=f"{sum(counts.values()):,} records rejected (details: errors.jsonl)")
    table.add_column("where")
    table.add_column("reason")
    table.add_column("records", justify="right")
    for (where, reason), count in counts.most_common():
        table.add_row(where, reason, f"{count:,}")
    return table
