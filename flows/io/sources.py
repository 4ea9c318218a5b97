"""Partitioned, resumable Bytewax sources of telemetry windows.

A partition is a shard of nodes. Each emits one :class:`WindowBatch` per window, in time order;
its resume state is a plain cursor: the last window it emitted. Windows are aligned to the
epoch (``time_ns // window_ns``) so every source cuts the same windows from the same data.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

from reflex_localize.flows.io.byte_ranges import ByteRange
from reflex_localize.flows.io.clock_survey import Node, NodeClocks, clock_node, survey_clocks
from reflex_localize.flows.io.plain_runs import PlainRuns
from reflex_localize.flows.io.shared_windows import SharedWindows, split_by_shard
from reflex_localize.flows.io.stream_clock import StampCheck, median_start
from reflex_localize.flows.io.window_lines import WindowLines
from reflex_localize.flows.messages import ErrorRecord, WindowBatch, shard_of
from reflex_localize.flows.signals.derive import factorize
from reflex_localize.schemas.codec import MAX_LINE_CHARS, Point, PointError
from reflex_localize.schemas.contract import load_schema
from reflex_localize.schemas.foreign_translate import ForeignTranslator
from reflex_localize.schemas.frame import Frame, frames_from_points
from reflex_localize.schemas.line_decoder import FramePart, assemble, decode_block, points_parts
from reflex_localize.schemas.line_file import Bytes, data_pieces, is_data, line_stamp, raw_tag


def shard_names(n_shards: int) -> list[str]:
    return [f"shard-{i}" for i in range(n_shards)]


def select_shard(
    frames: list[Frame], shard: int, n_shards: int, cache: dict[str, int]
) -> list[Frame]:
    """The rows of ``frames`` whose node belongs to ``shard``."""
    return split_by_shard(frames, n_shards, cache)[shard]


class _WindowPartition(StatefulSourcePartition[WindowBatch, int]):
    """Turns an iterator of ``(window, frames, errors)`` into per-shard batches."""

    def __init__(
        self,
        windows: Iterator[tuple[int, list[Frame], list[ErrorRecord]]],
        shard: str,
        n_shards: int,
        window_ns: int,
        resume: int | None,
        errors_per_shard: bool = False,
        rows_selected: bool = False,
    ) -> None:
        self._windows, self._shard, self._n = windows, shard, n_shards
        self._errors_per_shard, self._rows_selected = errors_per_shard, rows_selected
        self._index = int(shard.rsplit("-", 1)[1])
        self._window_ns, self._cursor = window_ns, resume if resume is not None else -1
        self._cache: dict[str, int] = {}

    def next_batch(self) -> list[WindowBatch]:
        for window, frames, errors in self._windows:
            if window <= self._cursor:
                continue  # already emitted before the restart
            self._cursor = window
            mine = (
                frames
                if self._rows_selected
                else select_shard(frames, self._index, self._n, self._cache)
            )
            batch = WindowBatch(
                self._shard,
                window,
                window * self._window_ns,
                (window + 1) * self._window_ns,
                mine,
                n_shards=self._n,
            )
            # Source-level rejects are counted once: each shard's own, or all with shard 0.
            batch.errors = errors if self._errors_per_shard or self._index == 0 else []
            return [batch]
        raise StopIteration

    def snapshot(self) -> int:
        return self._cursor


class WindowedSource(FixedPartitionedSource[WindowBatch, int]):
    """A source whose partitions are node shards cut from one stream of windows; subclasses
    say where the windows come from (``_windows``)."""

    n_shards: int
    window_ns: int
    # True when ``_shard_windows`` gives each shard only its own rejects (else shard 0 has all).
    errors_per_shard = False
    # True when ``_shard_windows`` gives each shard only its own rows (else it selects them).
    rows_selected = False

    def list_parts(self) -> list[str]:
        return shard_names(self.n_shards)

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> _WindowPartition:
        index = int(for_part.rsplit("-", 1)[1])
        return _WindowPartition(
            self._shard_windows(index),
            for_part,
            self.n_shards,
            self.window_ns,
            resume_state,
            self.errors_per_shard,
            self.rows_selected,
        )

    def _shard_windows(self, index: int) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        """The windows shard ``index`` needs; by default all of them (it selects its rows)."""
        return self._windows()

    def _windows(self) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        raise NotImplementedError


class MemorySource(WindowedSource):
    """Windows already generated in this process (the demo keeps its frames for reports)."""

    def __init__(
        self,
        windows: list[tuple[int, list[Frame]]],
        window_seconds: float = 10.0,
        n_shards: int = 1,
    ) -> None:
        self.windows, self.n_shards = windows, n_shards
        self.window_ns = int(window_seconds * 1e9)

    def _windows(self) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        for window, frames in self.windows:
            yield window, frames, []


class ChunkSource(WindowedSource):
    """Frames from a generator of chunks (the simulator's), cut into epoch-aligned windows.

    ``chunks(window_seconds, nodes)`` is called once per process (:mod:`flows.shared_windows`):
    the partitions of a process share one pass, each given its own shard's rows. ``nodes`` is
    None, or says which nodes this process's shards own: the chunks may leave the others out
    (the simulator does not lay out their rows). Another process makes its own pass, so the
    chunks must come out the same every time (a deterministic simulation). The shell hands
    the simulator in this way, so the flow never imports it.
    """

    rows_selected = True

    def __init__(
        self,
        chunks: Callable[[float, Callable[[str], bool] | None], Iterable[list[Frame]]],
        n_shards: int = 1,
        window_seconds: float = 10.0,
    ) -> None:
        self.chunks, self.n_shards = chunks, n_shards
        self.window_ns = int(window_seconds * 1e9)
        self._shared: SharedWindows | None = None

    def _shard_windows(self, index: int) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        if self._shared is None:
            self._shared = SharedWindows(self._windows_of, self.n_shards)
        return self._shared.reader(index)

    def _windows(self) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        return self._windows_of(None)

    def _windows_of(
        self, shards: frozenset[int] | None
    ) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        nodes = None
        if shards is not None and len(shards) < self.n_shards:
            owners: dict[str, int] = {}

            def nodes(node: str) -> bool:
                return owners.setdefault(node, shard_of(node, self.n_shards)) in shards

        for frames in self.chunks(self.window_ns / 1e9, nodes):
            yield from split_windows(frames, self.window_ns)


def split_windows(
    frames: list[Frame], window_ns: int
) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
    by_window: dict[int, list[Frame]] = {}
    for frame in frames:
        if not len(frame):
            continue
        windows = frame.time_ns // window_ns
        for window in np.unique(windows).tolist():
            mask = windows == window
            by_window.setdefault(window, []).append(frame if mask.all() else frame.take(mask))
    for window in sorted(by_window):
        yield window, by_window[window], []


class LineProtocolSource(WindowedSource):
    """Replays a line-protocol file (an incident capture, or `reflex simulate --out`).

    Lines may be out of order within ``disorder_windows``; a line later than that is counted
    as late in the error stream, not silently merged into a closed window.

    The window clock follows the stream, not any one line (:mod:`flows.stream_clock`): it
    starts at the median of the first stamps; a stamp ahead of the wall clock or long before
    the stream is refused, named as a unit mistake where it is one; a line more than
    ``disorder_windows + 1`` windows ahead of the clock is held until ``jump_quorum`` lines
    of several nodes agree (a real gap in the capture) or the stream goes on without it (an
    outlier, refused). A node whose clock is off is found from its lines against the others' at
    the file's start, and its lines re-stamped (:mod:`flows.io.clock_survey`).
    Identical points (same series, same stamp) are counted as duplicates and kept once.

    The shards of one process share one pass over the file (:mod:`flows.shared_windows`),
    and decoding, which is what costs, is split between processes: a plain line's node is read
    off its tags without decoding (:func:`line_owner`), and only the process that holds its
    shard decodes it, with the rest of its window's lines in one block
    (:mod:`schemas.line_decoder`). Lines whose node cannot be read that way (escapes, no node
    tag) are decoded by every process, which keeps its shards' rows; their rejects are counted
    by the process of shard 0 alone. Every process still reads every line's timestamp, so all
    shards close the same windows. (``reflex flow`` reads a file by byte range instead, so that
    no process reads another's lines: :mod:`flows.io.range_replay`, which runs this source's
    pass over each range.)
    """

    errors_per_shard = True
    rows_selected = True
    start_lines = 64  # stamps whose median starts the clock
    jump_quorum = 32  # held lines that confirm a jump of the stream (from several nodes)
    survey_bytes = 1 << 24  # read first to find the nodes whose clocks are off
    piece_chars = 1 << 22  # read at a time (tests make it small, to cross many pieces)

    def __init__(
        self,
        path: Path,
        n_shards: int = 1,
        window_seconds: float = 10.0,
        disorder_windows: int = 2,
        now_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.path, self.n_shards = Path(path), n_shards
        self.window_ns, self.disorder = int(window_seconds * 1e9), disorder_windows
        self.now_ns = now_ns
        self._shared: SharedWindows | None = None
        self._clocks: NodeClocks | None = None

    def _windows(self) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        return self._pass(None)

    def _shard_windows(self, index: int) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        if self._shared is None:
            self._shared = SharedWindows(self._pass, self.n_shards)
        return self._shared.reader(index)

    def _node_clocks(self) -> NodeClocks:
        """The survey of the file's first bytes (the same in every pass, so made once); a node
        within a window of the others, or 5 s, keeps its stamps: a collector that batches its
        writes lands its lines about that much after the others' in a capture."""
        if self._clocks is None:
            tolerance_s = max(5.0, self.window_ns / 1e9)
            self._clocks = survey_clocks(self.path, self.survey_bytes, tolerance_s)
        return self._clocks

    def _first_stamps(self, offset: int = 0) -> list[int]:
        stamps = []
        span = None if offset == 0 else (offset, self.path.stat().st_size)
        for _, lines, raw in data_pieces(self.path, 1 << 16, span=span):
            lines, _ = self._node_clocks().restamp(lines, raw)
            for line in lines:
                stamp = line_stamp(line) if is_data(line) else None
                if stamp is not None:
                    stamps.append(stamp)
                    if len(stamps) >= self.start_lines:
                        return stamps
        return stamps

    def _pass(
        self, shards: frozenset[int] | None, span: ByteRange | None = None
    ) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        """The windows of ``shards`` (None: of every shard) from one pass over the file; or,
        given ``span``, the windows of that byte range's lines (every shard's rows)."""
        start = median_start(self._first_stamps())
        check = StampCheck(start, self.now_ns()) if start is not None else None
        replay = _Replay(self, shards)
        clocks = self._node_clocks()
        if span is None or span.start == 0:  # told once: by the pass that owns the file's start
            replay.errors += clocks.tell(replay.counts_node)
        clock_start = start
        if span is not None:
            clock_start = median_start(self._first_stamps(span.warm_from))
            replay.lines_before = lambda: span.lines_before
        if clock_start is not None:
            replay.newest = clock_start // self.window_ns
        held: list[tuple[int, str, int]] = []  # far-ahead lines waiting for the stream
        held_nodes: set[Node | None] = set()  # their nodes: one node cannot move the clock
        since_held = 0  # lines within the clock read since the first held one
        low, high = check.bounds() if check is not None else (0.0, -1.0)
        mapping = replay.foreign.mapping
        runs = PlainRuns(replay, math.ceil(low), math.floor(high), self.window_ns, mapping)
        for before, lines, raw in self._pieces(replay, span, held):
            lines, raw = clocks.restamp(lines, raw)
            runs.read(lines, raw)
            at = 0
            while at < len(lines):
                # Nearly every line: a trusted stamp in an open window the clock has reached,
                # taken a run at a time while the stream holds nothing far ahead.
                if not held and (end := runs.end(at)) > at:
                    replay.queue_run(before, lines, runs, at, end)
                    at = end
                    continue
                number, line = before + at + 1, lines[at]
                at += 1
                if not is_data(line):
                    continue
                stamp = line_stamp(line)
                if (
                    stamp is not None
                    and not held
                    and low <= stamp <= high
                    and replay.closed < stamp // self.window_ns <= replay.newest
                    and replay.queue(number, line, stamp)
                ):
                    continue
                if stamp is not None and check is not None:
                    refused = check.refusal(stamp)
                    if refused is not None:
                        replay.refuse(number, line, *refused)
                        continue
                    if stamp // self.window_ns > replay.newest + self.disorder + 1:
                        held.append((number, line, stamp))
                        held_nodes.add(clock_node(line))
                        if len(held) >= self.jump_quorum and len(held_nodes) >= clocks.jump_nodes:
                            yield from replay.take_all(held)  # the stream jumped: follow it
                            held.clear()
                            held_nodes.clear()
                            since_held = 0
                        continue
                    if held:
                        since_held += 1
                        if since_held > 2 * self.jump_quorum:  # the stream went on without them
                            replay.refuse_ahead(held)
                            held.clear()
                            held_nodes.clear()
                            since_held = 0
                yield from replay.take(number, line, stamp)
        if held and since_held == 0 and len(held_nodes) >= clocks.jump_nodes:
            yield from replay.take_all(held)  # the stream ended after a jump: follow it
        elif held:
            replay.refuse_ahead(held)
        yield from replay.finish()

    def _pieces(
        self, replay: _Replay, span: ByteRange | None, held: list[tuple[int, str, int]]
    ) -> Iterator[tuple[int, Sequence[str], Bytes]]:
        """The pieces of the pass: the whole file, or a byte range's with, for their time only,
        the lines before it that set the clock and, while a line of its own is held far ahead,
        the lines after it that decide that line's fate. A piece's lines are read as str only
        where asked for (:class:`~schemas.line_file.PieceText`)."""
        if span is None:
            yield from data_pieces(
                self.path, self.piece_chars, on_long_line=replay.refuse_long, lazy=True
            )
            return
        read = 0  # lines read so far
        for region, (begin, end) in enumerate(span.regions()):
            replay.warming = region == 0
            if region == 0:
                replay.own_first = 1 << 62  # none of them its own yet
            elif region == 1:
                replay.own_first = read + 1
            elif region == 2:
                replay.own_last = read
            offset = read

            def refuse_long(number: int, length: int, offset: int = offset) -> None:
                replay.refuse_long(offset + number, length)

            for before, lines, raw in data_pieces(
                self.path, self.piece_chars, on_long_line=refuse_long, span=(begin, end), lazy=True
            ):
                if region == 2 and not any(replay.owned(number) for number, _, _ in held):
                    return
                read = offset + before + len(lines)
                yield offset + before, lines, raw


_MOST_HEADS = 1 << 18  # heads whose owner a replay remembers (a few tens of MB)


class _Replay:
    """One pass over a line-protocol file for some shards: its window clock, pending windows,
    the points it has seen (for duplicates) and its rejects."""

    def __init__(self, source: LineProtocolSource, shards: frozenset[int] | None) -> None:
        self.source = source
        # The shards whose lines this pass decodes; None: all (no node need be read).
        # (A pass for every shard needs no node read either.)
        self.mine = None if shards is None or len(shards) >= source.n_shards else shards
        self.counts_shared = self.mine is None or 0 in self.mine
        self.window_ns, self.disorder = source.window_ns, source.disorder
        self.pending: dict[int, _OpenWindow] = {}
        # window -> (series text, field names, stamp) of the points taken: a line that repeats
        # one is a duplicate (a line that adds other fields to the series is not)
        self.seen: dict[int, set[tuple[str, tuple[str, ...], int]]] = {}
        self.errors: list[ErrorRecord] = []
        self.closed = self.newest = -1
        self.owners: dict[str, int] = {}
        self.owner_by_head: dict[str, int] = {}  # a run's line owners (_owners_of)
        self.foreign = ForeignTranslator()  # one per pass: it remembers the last XID per GPU
        # A pass over a byte range (flows/io/byte_ranges.py) reads some lines before and after
        # its own for their time alone: its own are the lines numbered own_first to own_last.
        self.own_first, self.own_last = 1, math.inf
        self.lines_before: Callable[[], int] = lambda: 0  # lines of the file before the read
        self.warming = False  # reading lines before the range: windows closed are not its own

    def owned(self, number: int) -> bool:
        return self.own_first <= number <= self.own_last

    def line(self, number: int) -> int:
        """A line's number in the file (``number`` counts from where the pass began reading)."""
        if self.own_first == 1 and self.own_last == math.inf:
            return number
        return number + self.lines_before()

    def counts_node(self, node: str) -> bool:
        """Whether this pass counts the rejects of ``node``'s lines (its shard is one of its)."""
        return self.mine is None or shard_of(node, self.source.n_shards) in self.mine

    def _counted(self, line: str) -> tuple[int, bool]:
        """The line's owning shard (-1: shared) and whether this pass counts its rejects."""
        if self.mine is None:
            return -1, True
        owner = line_owner(line, self.source.n_shards, self.owners)
        return owner, (owner in self.mine) if owner >= 0 else self.counts_shared

    def reject(self, code: str, detail: str) -> None:
        self.errors.append(ErrorRecord("source", code, detail[:300]))

    def refuse(self, number: int, line: str, code: str, detail: str) -> None:
        if self.owned(number) and self._counted(line)[1]:
            self.reject(code, f"line {self.line(number)}: {detail}")

    def refuse_long(self, number: int, length: int) -> None:
        """A line the reader read past, too long to hold (its node unknown: counted once)."""
        detail = f"{length:,} characters or more, over the limit of {MAX_LINE_CHARS:,}: read past"
        self.refuse(number, "", "line_too_long", detail)

    def refuse_ahead(self, held: list[tuple[int, str, int]]) -> None:
        for number, line, stamp in held:
            ahead = (stamp - (self.newest + 1) * self.window_ns) / 1e9
            detail = f"{stamp} is {ahead:,.0f} s ahead of the stream, which did not follow it"
            self.refuse(number, line, "timestamp_ahead_of_stream", detail)

    def advance(self, window: int) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        if window > self.closed and window not in self.pending:
            self.pending[window] = _OpenWindow()
        if window > self.newest:
            self.newest = window
            for ready in sorted(w for w in self.pending if w < self.newest - self.disorder):
                self.closed = ready
                if self.warming:  # lines before a byte range: the range before it has them
                    self.pending.pop(ready)
                    self.seen.pop(ready, None)
                    continue
                yield ready, self.close(ready), self.errors
                self.errors = []

    def take_all(
        self, held: list[tuple[int, str, int]]
    ) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        for number, line, stamp in held:
            yield from self.take(number, line, stamp)

    def take(
        self, number: int, line: str, stamp: int | None
    ) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        if stamp is not None:
            yield from self.advance(stamp // self.window_ns)
        if not self.owned(number):
            if not self.foreign.is_reflex_line(line):
                self._translate_only(line)
            elif self.warming and stamp is not None and stamp // self.window_ns > self.closed:
                self.pending[stamp // self.window_ns].add_earlier(number, line, stamp)
            return  # a line of another range: only its time was needed
        owner, counted = self._counted(line)
        if owner >= 0 and self.mine is not None and owner not in self.mine:
            return  # another process's line: only its time was needed
        reflex = self.foreign.is_reflex_line(line)
        if stamp is not None and stamp // self.window_ns > self.closed and reflex:
            # Decoded with its window's other lines in one block (schemas/line_decoder.py).
            self.pending[stamp // self.window_ns].add_line(number, line, stamp, counted)
            return
        try:
            # Reflex lines are decoded (a Telegraf host tag is no reason to refuse); Telegraf and
            # dcgm-exporter lines become Reflex points (schemas/foreign_translate.py).
            points, notes = self.foreign.decode(line)
        except Exception as error:
            if counted:
                code = error.code if isinstance(error, PointError) else "unparseable"
                self.reject(code, f"line {self.line(number)}: {error}")
            return
        if counted:
            at = f"line {self.line(number)}"
            self.errors += [ErrorRecord(n.where, n.code, f"{at}: {n.detail}"[:300]) for n in notes]
        for point in points:
            self.place(number, line, stamp, point, counted)

    def _translate_only(self, line: str) -> None:
        """Lets the translator see a foreign line of another range: it remembers the last XID
        per GPU, as it would have in a pass over the whole file."""
        with contextlib.suppress(Exception):  # that range's pass counts it
            self.foreign.decode(line)

    def place(self, number: int, line: str, stamp: int | None, point: Point, counted: bool) -> None:
        """Puts one decoded point of line ``number`` in its pending window, or counts why not."""
        if point.time_ns != stamp:
            # int() also takes "+5", "1_0" or non-ASCII digits; the other shards went by the
            # plain digits (line_stamp), so a point stamped otherwise cannot be placed the
            # same way in every shard.
            if counted:
                stamp_text = line.rsplit(" ", 1)[-1]
                self.reject("timestamp_not_plain_ns", f"line {self.line(number)}: {stamp_text}")
            return
        window = point.time_ns // self.window_ns
        if window <= self.closed:
            if counted:
                late = (self.closed + 1) * self.window_ns - point.time_ns
                behind = f"{late / 1e9:,.1f} s behind the closed windows"
                self.reject("late", f"line {self.line(number)}: {behind}")
            return
        series = (line.partition(" ")[0], tuple(point.fields), point.time_ns)
        seen = self.seen.setdefault(window, set())
        if series in seen:
            if counted:
                where = f"line {self.line(number)}: {series[0][:200]} at {stamp}"
                self.reject("duplicate_point", where)
            return
        seen.add(series)
        self.open(window).add_point(point)

    def queue(self, number: int, line: str, stamp: int) -> bool:
        """Takes a line whose window is open and reached, leaving its decoding to the window's
        block; False when it must go the long way (a foreign line, decoded at once)."""
        pending = self.open(stamp // self.window_ns)  # every shard has every window
        if not self.owned(number):
            if not self.foreign.is_reflex_line(line):
                return False  # a foreign line: the translator sees it
            if self.warming:
                pending.add_earlier(number, line, stamp)
            return True
        owner, counted = self._counted(line)
        if owner >= 0 and self.mine is not None and owner not in self.mine:
            return True  # another process's line: only its time was needed
        if not self.foreign.is_reflex_line(line):
            return False  # a foreign line: translated in line order (the translator keeps memory)
        pending.add_line(number, line, stamp, counted)
        return True

    def queue_run(
        self, before: int, lines: Sequence[str], runs: PlainRuns, at: int, end: int
    ) -> None:
        """Takes lines ``at:end`` of a piece (``before`` lines came before it), a run that
        :class:`~flows.plain_runs.PlainRuns` found: as :meth:`queue` takes each of them."""
        windows, stamps = runs.windows[at:end], runs.stamps[at:end]  # type: ignore[index]
        first = int(windows[0])
        if not self.owned(before + at + 1):  # a piece is all in one range: lines for time only
            for window in np.unique(windows).tolist():
                held = self.open(window)
                if self.warming:  # lines an own line may repeat (see _OpenWindow.earlier)
                    chosen = np.flatnonzero(windows == window).tolist()
                    held.earlier.extend((before + at + 1 + row, lines[at + row], int(stamps[row]))
                                        for row in chosen)  # fmt: skip
        elif self.mine is not None:
            self._queue_mine(before, lines, at, end, windows, stamps)
        elif windows[-1] == first and (windows == first).all():
            held = self.open(first)
            held.numbers.extend(range(before + at + 1, before + end + 1))
            held.lines.extend_run(lines, at, end)
            held.stamps.extend(stamps.tolist())
        else:
            for window in np.unique(windows).tolist():
                self._file(self.open(window), before, lines, at, stamps, windows == window)

    def _queue_mine(
        self,
        before: int,
        lines: Sequence[str],
        at: int,
        end: int,
        windows: np.ndarray,
        stamps: np.ndarray,
    ) -> None:
        """A run of a pass for some shards: each line's node read off its tags (as
        :meth:`_counted` reads it), another process's lines left (their windows opened all the
        same), lines of no readable node kept, their rejects counted by shard 0's process."""
        owner = self._owners_of(lines[at:end])
        shared = owner < 0
        kept = shared | np.isin(owner, list(self.mine or ()))
        uncounted = None if self.counts_shared else shared
        for window in np.unique(windows).tolist():
            self._file(self.open(window), before, lines, at, stamps, kept & (windows == window),
                       uncounted)  # fmt: skip

    def _owners_of(self, lines: Sequence[str]) -> np.ndarray:
        """Each line's :func:`line_owner`, remembered by head (the text before the first space,
        all that it reads): a capture repeats the heads of its series window after window."""
        heads, n_shards, owners = self.owner_by_head, self.source.n_shards, self.owners
        if len(heads) > _MOST_HEADS:
            heads.clear()
        found = []
        for line in lines:
            space = line.find(" ")
            if space < 0:
                found.append(-1)  # no head end: no node read (see raw_tag)
                continue
            head = line[:space]
            owner = heads.get(head)
            if owner is None:
                owner = heads[head] = line_owner(line, n_shards, owners)
            found.append(owner)
        return np.array(found, np.int64)

    @staticmethod
    def _file(
        held: _OpenWindow,
        before: int,
        lines: Sequence[str],
        at: int,
        stamps: np.ndarray,
        chosen: np.ndarray,
        uncounted: np.ndarray | None = None,
    ) -> None:
        """Adds the ``chosen`` lines of a run (lines ``at:`` of a piece that ``before`` lines
        came before), in order; those also ``uncounted`` have their rejects counted by another
        process."""
        rows = np.flatnonzero(chosen)
        if uncounted is not None:
            held.uncounted.update((len(held.lines) + np.flatnonzero(uncounted[rows])).tolist())
        held.numbers.extend(before + at + 1 + row for row in rows.tolist())
        held.lines.extend_rows(lines, at + rows)
        held.stamps.extend(stamps[rows].tolist())

    def open(self, window: int) -> _OpenWindow:
        held = self.pending.get(window)
        if held is None:
            held = self.pending[window] = _OpenWindow()
        return held

    def close(self, window: int) -> list[Frame]:
        """The window's frames: its deferred lines decoded in one block, merged in the order
        taken with the points decoded at once; rejects and duplicates counted."""
        self.seen.pop(window, None)
        held = self.pending.pop(window)
        if not held.lines:
            return frames_from_points([point for _, point in held.points])
        shadows = held.shadow_earlier()
        stamps = np.array(held.stamps, np.int64)
        block = decode_block(held.lines, carry_tags=True, stamps=stamps)
        for position, error in block.rejects:
            if position not in held.uncounted:
                code = error.code if isinstance(error, PointError) else "unparseable"
                self.reject(code, f"line {self.line(held.numbers[position])}: {error}")
        # Line i sorts at 2i + 1, a point taken after b lines at 2b: the order they came in.
        parts = points_parts([(2 * b, point) for b, point in held.points], load_schema())
        for frame, positions, unrepeated in zip(
            block.frames, block.positions, block.unrepeated, strict=True
        ):
            keep = self._placeable(frame, positions, held, stamps[positions], unrepeated)
            keep &= positions >= shadows  # an earlier range's line: that range has it
            if keep.all():
                parts.append(FramePart.of(frame, 2 * positions + 1))
            elif keep.any():
                parts.append(FramePart.of(frame.take(keep), 2 * positions[keep] + 1))
        return assemble(parts)[0]

    def _placeable(
        self,
        frame: Frame,
        positions: np.ndarray,
        held: _OpenWindow,
        stamps: np.ndarray,
        unrepeated: bool = False,
    ) -> np.ndarray:
        """Rows of a block's frame that are neither stamped otherwise than their line's plain
        digits nor a repeat of an earlier row of the same series; those are counted.
        ``unrepeated``: the decoder found no two rows that share tags and stamp."""
        keep = frame.time_ns == stamps
        for row in np.flatnonzero(~keep).tolist():
            position = int(positions[row])
            if position not in held.uncounted:
                stamp = held.lines[position].rsplit(" ", 1)[-1]
                where = f"line {self.line(held.numbers[position])}: {stamp}"
                self.reject("timestamp_not_plain_ns", where)
        if unrepeated or not _repeats_a_row(frame):
            return keep  # no two rows share tags and stamp: no line repeats another
        seen: set[tuple[str, int]] = set()
        for row, position in enumerate(positions.tolist()):
            series = (held.lines[position].partition(" ")[0], held.stamps[position])
            if not keep[row]:
                continue
            if series in seen:
                keep[row] = False
                if position not in held.uncounted:
                    number = self.line(held.numbers[position])
                    where = f"line {number}: {series[0][:200]} at {series[1]}"
                    self.reject("duplicate_point", where)
            seen.add(series)
        return keep

    def finish(self) -> Iterator[tuple[int, list[Frame], list[ErrorRecord]]]:
        for window in sorted(self.pending):
            yield window, self.close(window), self.errors
            self.errors = []
        if self.errors:
            yield self.closed + 1, [], self.errors


@dataclass
class _OpenWindow:
    """What an open window holds, in the order taken: Reflex lines, decoded in one block when
    it closes, and points decoded at once (foreign lines), each with the count of lines taken
    before it."""

    numbers: list[int] = field(default_factory=list)
    lines: WindowLines = field(default_factory=WindowLines)  # spans of pieces, mostly
    stamps: list[int] = field(default_factory=list)
    uncounted: set[int] = field(default_factory=set)  # lines whose rejects another shard counts
    points: list[tuple[int, Point]] = field(default_factory=list)
    # (number, line, stamp): lines of the range before a byte range's own, read for their time,
    # that fell in this window while it was open; an own line may repeat one of them.
    earlier: list[tuple[int, str, int]] = field(default_factory=list)

    def add_line(self, number: int, line: str, stamp: int, counted: bool) -> None:
        if not counted:
            self.uncounted.add(len(self.lines))
        self.numbers.append(number)
        self.lines.append(line)
        self.stamps.append(stamp)

    def add_point(self, point: Point) -> None:
        self.points.append((len(self.lines), point))

    def add_earlier(self, number: int, line: str, stamp: int) -> None:
        self.earlier.append((number, line, stamp))

    def shadow_earlier(self) -> int:
        """Puts before the window's lines those of :attr:`earlier` that one of them may repeat
        (same head and stamp), uncounted, so the block finds a repeat as a whole pass finds it;
        returns how many (their rows are dropped: the earlier range has them)."""
        if not self.earlier:
            return 0
        mine = {
            (line.partition(" ")[0], stamp)
            for line, stamp in zip(self.lines, self.stamps, strict=True)
        }
        shadows = [e for e in self.earlier if (e[1].partition(" ")[0], e[2]) in mine]
        self.earlier = []
        if not shadows:
            return 0
        n = len(shadows)
        self.numbers[:0] = [number for number, _, _ in shadows]
        self.lines.prepend([line for _, line, _ in shadows])
        self.stamps[:0] = [stamp for _, _, stamp in shadows]
        self.uncounted = set(range(n)) | {position + n for position in self.uncounted}
        self.points = [(taken + n, point) for taken, point in self.points]
        return n


def _repeats_a_row(frame: Frame) -> bool:
    """Whether two rows share their tags and stamp: tag columns as codes, rows sorted by
    them, neighbours compared (a set of row tuples cost a Python tuple per row)."""
    if len(frame) < 2:
        return False
    keys = [frame.time_ns, *(factorize(column)[1] for column in frame.tags.values())]
    order = np.lexsort(keys)
    same = np.ones(len(order) - 1, bool)
    for key in keys:
        ordered = key[order]
        same &= ordered[1:] == ordered[:-1]
    return bool(same.any())


def line_owner(line: str, n_shards: int, owners: dict[str, int]) -> int:
    """The shard of a line's node, read off its tags without decoding; -1 when that cannot be
    done safely (see :func:`raw_tag`), so that every shard decodes it."""
    node = raw_tag(line, "node")
    if node is None:
        return -1
    owner = owners.get(node)
    if owner is None:
        owner = owners[node] = shard_of(node, n_shards)
    return owner
