"""The impact model's training rows, kept by the live flow as it computes them.

`reflex fit-impact` learns from each rank's slowdown against its peers and its parts' anomaly
indicators, per window (:func:`flows.impact_model.impact_rows`). Reading a day of a large
fleet back out of InfluxDB to recompute them costs hours (about 5 s of Flux per 10 s window
of 1,024 GPUs, shared/notes/influxdb.md), while the flow has them in hand every window. So the
flow appends them, one line per job window, to ``DIR/rows-YYYY-MM-DD-NAME.jsonl`` (the UTC day
of the window's end; NAME tells the flow's processes apart, as a job's windows are all on one
worker), and deletes days older than ``keep_days``. A refit then reads a week of 1,024 GPUs
and fits it in one to two minutes, in 280 MiB (``benchmarks/impact_refit.py``):
``reflex fit-impact --rows DIR --last 7d``.

A write that fails (a full disk) is logged and counted, never raised into the flow: the rows
are a convenience for the refit, not results. A replay after recovery writes some windows
again; the reader keeps one copy of each job window, and counts a line a crash cut short.

>>> import tempfile
>>> directory = Path(tempfile.mkdtemp())
>>> log = ImpactRowsLog(directory, "p0")
>>> log("train", 1_767_225_610 * 10**9, [({"sm_clock_low": 1.5}, 0.08), ({}, 0.0)])
>>> read_rows(directory, 0, 2 * 10**18)  # rows, the rank-windows each stands for, unreadable
([({'sm_clock_low': 1.5}, 0.08), ({}, 0.0)], [1.0, 1.0], 0)
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import IO

import numpy as np

from reflex_localize.flows.impact.fit import Row, RowPasses
from reflex_localize.flows.impact.model import clipped_slowdown

_log = logging.getLogger(__name__)

Rows = list[tuple[dict[str, float], float]]
PREFIX = "rows-"


def _day(time_ns: int) -> date:
    return datetime.fromtimestamp(time_ns / 1e9, UTC).date()


class ImpactRowsLog:
    """A ``JobConfig.impact_recorder`` that appends rows to daily files; see the module."""

    def __init__(self, directory: Path, name: str = "p0", keep_days: int = 8) -> None:
        self.directory, self.name, self.keep_days = Path(directory), name, keep_days
        self.failed_writes = 0
        self._lock = threading.Lock()  # `reflex flow -w N`: the workers of a process share it
        self._day: date | None = None
        self._file: IO[str] | None = None

    def __call__(self, job: str, end_ns: int, rows: Rows) -> None:
        if not rows:
            return
        # Ranks with no anomaly (97% of them in the demo) inform only the level: one count
        # and mean slowdown per window leaves the least-squares fit as it was (its R^2, over
        # the folded rows, reads higher), at a sixth of the size (the demo: 163 KB -> 26 KB).
        shown = [(f, s) for f, s in rows if any(f.values())]
        clean = clipped_slowdown(np.array([s for f, s in rows if not any(f.values())]))
        record: dict = {
            "t": end_ns,
            "job": job,
            "rows": [[round(s, 4), {k: round(v, 3) for k, v in f.items() if v}] for f, s in shown],
        }
        if len(clean):
            record["clean"] = [len(clean), round(float(clean.mean()), 5)]
        line = json.dumps(record, separators=(",", ":"))
        try:
            with self._lock:
                file = self._file_for(_day(end_ns))
                file.write(line + "\n")
                file.flush()
        except OSError as error:
            self.failed_writes += 1
            if self.failed_writes == 1 or self.failed_writes % 1000 == 0:
                _log.warning(
                    "impact rows not kept in %s (%d windows so far): %s",
                    self.directory, self.failed_writes, error,
                )  # fmt: skip

    def _file_for(self, day: date) -> IO[str]:
        if day != self._day or self._file is None:
            if self._file is not None:
                self._file.close()
            self._file, self._day = None, day  # a failed open is tried again next window
            self.directory.mkdir(parents=True, exist_ok=True)
            # Kept open across windows (one write a window), closed when the day turns.
            path = self.directory / f"{PREFIX}{day.isoformat()}-{self.name}.jsonl"
            self._file = open(path, "a")  # noqa: SIM115
            self._prune(day)
        return self._file

    def _prune(self, today: date) -> None:
        oldest = today - timedelta(days=self.keep_days)
        for path in self.directory.glob(f"{PREFIX}*.jsonl"):
            day = _file_day(path)
            if day is not None and day < oldest:
                path.unlink(missing_ok=True)


def _file_day(path: Path) -> date | None:
    try:
        return date.fromisoformat(path.name[len(PREFIX) : len(PREFIX) + 10])
    except ValueError:
        return None


def row_passes(directory: Path, start_ns: int, stop_ns: int) -> tuple[RowPasses, int]:
    """The rows of the job windows that ended in ``[start_ns, stop_ns)``, as passes a fit can
    make over them (:func:`flows.impact_fit.fit_impact_passes`), each job window once (the last
    copy: a replay after recovery wrote it again), with how many rank-windows each row stands
    for (a window's ranks without anomaly are one row); and how many lines could not be read
    (a line a crash cut short). Only where each kept window's line is stays in memory: a week
    of a large fleet is read again on each pass rather than held."""
    paths = _paths(Path(directory), start_ns, stop_ns)
    last: dict[tuple[str, int], tuple[int, int, bool]] = {}
    unreadable = 0
    for index, path in enumerate(paths):
        for number, record in _records(path):
            try:
                t, job = int(record["t"]), str(record["job"])
            except (ValueError, KeyError, TypeError):
                unreadable += 1
                continue
            if start_ns <= t < stop_ns:
                last[(job, t)] = (index, number, _rows_of(record) is not None)
    unreadable += sum(not readable for _, _, readable in last.values())
    chosen = {(index, number) for index, number, readable in last.values() if readable}

    def passes() -> Iterator[Row]:
        for index, path in enumerate(paths):
            for number, record in _records(path):
                if (index, number) in chosen:
                    yield from _rows_of(record) or []

    return passes, unreadable


def read_rows(directory: Path, start_ns: int, stop_ns: int) -> tuple[Rows, list[float], int]:
    """:func:`row_passes`' rows in hand: (rows, the rank-windows each stands for, unreadable)."""
    passes, unreadable = row_passes(directory, start_ns, stop_ns)
    kept = list(passes())
    return [(e, s) for e, s, _ in kept], [w for _, _, w in kept], unreadable


def _paths(directory: Path, start_ns: int, stop_ns: int) -> list[Path]:
    first, last = _day(start_ns), _day(max(start_ns, stop_ns - 1))
    paths = []
    for path in sorted(directory.glob(f"{PREFIX}*.jsonl")):
        day = _file_day(path)
        if day is not None and first <= day <= last:
            paths.append(path)
    return paths


def _records(path: Path) -> Iterator[tuple[int, dict]]:
    """Each line's record with its line number; a line that is not JSON as an empty record. A
    file pruned since an earlier pass has none."""
    try:
        with open(path) as lines:
            for number, line in enumerate(lines):
                try:
                    record = json.loads(line)
                except ValueError:
                    record = {}
                yield number, record if isinstance(record, dict) else {}
    except FileNotFoundError:
        return


def _rows_of(record: dict) -> list[Row] | None:
    """A kept window's rows, each with the rank-windows it stands for; None if unreadable."""
    try:
        shown: list[Row] = [
            ({str(k): float(v) for k, v in f.items()}, float(s), 1.0) for s, f in record["rows"]
        ]
        count, mean = record.get("clean", (0, 0.0))
        clean: list[Row] = [({}, float(mean), float(count))] if int(count) > 0 else []
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return shown + clean
