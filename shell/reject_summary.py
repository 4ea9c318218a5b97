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
import logging
import os
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from reflex_localize.flows.incidents.events import LocalizationEvent
from reflex_localize.flows.messages import ErrorRecord
from reflex_localize.shell.logging_setup import ENV_FORMAT

_log = logging.getLogger("reflex.rejects")


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


def reject_rows(counts: Counter[tuple[str, str]]) -> list[dict[str, str | int]]:
    """The table's rows as plain data, most frequent first (``--json``)."""
    return [
        {"where": where, "reason": reason, "records": count}
        for (where, reason), count in counts.most_common()
    ]


def run_document(
    events: list[LocalizationEvent], counts: Counter[tuple[str, str]]
) -> dict[str, object]:
    """What a run found, for ``--json``: every event whole, and the rejects table's rows."""
    return {
        "events": [json.loads(event.to_json()) for event in events],
        "rejected": sum(counts.values()),
        "rejects": reject_rows(counts),
    }


def report_rejects(counts: Counter[tuple[str, str]]) -> None:
    """On stderr: the table, or under ``--log-format json`` one log record with its rows, so
    that a log shipper reading stderr gets JSON only."""
    if not counts:
        return
    if os.environ.get(ENV_FORMAT) == "json":
        _log.warning(
            "%d records rejected: %s", sum(counts.values()), json.dumps(reject_rows(counts))
        )
    else:
        Console(stderr=True).print(reject_table(counts))


def reject_table(counts: Counter[tuple[str, str]]) -> Table:
    table = Table(title=f"{sum(counts.values()):,} records rejected (details: errors.jsonl)")
    table.add_column("where")
    table.add_column("reason")
    table.add_column("records", justify="right")
    for (where, reason), count in counts.most_common():
        table.add_row(where, reason, f"{count:,}")
    return table
