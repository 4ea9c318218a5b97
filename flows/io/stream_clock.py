"""Which timestamps a replay can trust, and when its clock may move.

A replay's window clock must not follow any one line: a single line stamped 50 years ahead
once closed every window of a capture and dropped the rest of the file as late. So:

* the clock starts at the median stamp of the file's first lines, not the first one;
* a stamp ahead of the wall clock, or far before the stream's start, is refused with a reason
  (a stamp in seconds, milliseconds or microseconds where nanoseconds belong is named so);
* a stamp far ahead of the clock is held, not obeyed: held lines that many later lines
  agree with are a real jump in the stream (a gap in the capture) and the clock follows
  them; held lines that the stream does not follow are refused as outliers.

Every shard of a replay reads every line's stamp, so every shard takes the same decisions.

>>> check = StampCheck(start_ns=1_700_000_000 * 10**9, now_ns=1_700_000_600 * 10**9)
>>> check.refusal(1_700_000_010 * 10**9) is None
True
>>> check.refusal(1_700_000_010)[0], check.refusal(2_000_000_000 * 10**9)[0]
('timestamp_in_seconds', 'timestamp_in_future')
"""

from __future__ import annotations

from dataclasses import dataclass

# (code, multiplier): a stamp that lands near the stream once multiplied was in that unit.
_UNITS = (
    ("timestamp_in_seconds", 10**9),
    ("timestamp_in_milliseconds", 10**6),
    ("timestamp_in_microseconds", 10**3),
)
_DAY_NS = 86_400 * 10**9


@dataclass(frozen=True)
class StampCheck:
    """Refuses stamps no stream can hold: ahead of the wall clock, or far before the start."""

    start_ns: int  # the stream's start (the median of its first stamps)
    now_ns: int  # the wall clock when the replay began
    max_ahead_of_wall_s: float = 300.0
    max_before_start_s: float = 3600.0

    def bounds(self) -> tuple[float, float]:
        """``(low, high)``: :meth:`refusal` is None for every stamp with low <= stamp <= high
        (the same float arithmetic, so a replay may test these first and skip the call)."""
        return (
            self.start_ns - self.max_before_start_s * 1e9,
            self.now_ns + self.max_ahead_of_wall_s * 1e9,
        )

    def refusal(self, stamp: int) -> tuple[str, str] | None:
        """``(code, detail)`` when ``stamp`` cannot be right, else None."""
        if stamp > self.now_ns + self.max_ahead_of_wall_s * 1e9:
            ahead = (stamp - self.now_ns) / 1e9
            return "timestamp_in_future", f"{stamp} is {ahead:,.0f} s ahead of the wall clock"
        if stamp < self.start_ns - self.max_before_start_s * 1e9:
            for code, factor in _UNITS:
                if abs(stamp * factor - self.start_ns) < _DAY_NS:
                    unit = code.rsplit("_", 1)[1]
                    return code, f"{stamp} reads as {unit}; line protocol here is nanoseconds"
            before = (self.start_ns - stamp) / 1e9
            return "timestamp_before_stream", f"{stamp} is {before:,.0f} s before the stream"
        return None


def median_start(stamps: list[int]) -> int | None:
    """The stream's start: the median of its first stamps (one bad stamp cannot move it)."""
    if not stamps:
        return None
    ordered = sorted(stamps)
    return ordered[len(ordered) // 2]
