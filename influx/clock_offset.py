"""How far this host's clock is from InfluxDB's, measured from the ``Date`` of its answers.

The flow closes a window a few seconds after its end by its own clock, so a node whose clock
runs 30 s behind writes every point after its window closed: the points are counted late and
the node looks missing. NTP should prevent that, and often does not (a stopped chronyd, a VM
resumed from suspend). The writers already talk to InfluxDB every few seconds, and every HTTP
answer carries the server's time in its ``Date`` header, to the second (RFC 9110). That is
enough: a request sent at local time ``t0`` and answered at ``t1`` with ``Date: D`` bounds the
offset (server minus local) to ``[D - t1, D + 1 s - t0]``. Answers come at every phase of the
second, so the intersection of a few dozen such intervals narrows to about the round trip.

Only an offset *known* to exceed ``tolerance_s`` is corrected: a node that NTP keeps within
milliseconds must keep its own, better stamps, and a 1-second header cannot improve on them.
Once correcting, the correction stops only when the offset is back within half the tolerance,
so stamps do not jump back and forth around the threshold. When samples disagree (the clock
was stepped), the older ones go.

Standard library only: the training hook uses it too.

>>> offset = ClockOffset(tolerance_s=2.0, wall=lambda: 0)
>>> second = 1_000_000_000
>>> for phase in range(10):  # local clock 30.25 s behind: Date says 30 s or 31 s later
...     sent = phase * second // 10
...     offset.observe(sent, sent + second // 100, http_date(sent + 30_250_000_000))
>>> estimate = offset.estimate()
>>> round(estimate.offset_s, 1), estimate.error_s < 0.1, offset.correction_ns() > 0
(30.2, True, True)
"""

from __future__ import annotations

import email.utils
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

_SECOND_NS = 1_000_000_000


@dataclass(frozen=True)
class OffsetEstimate:
    """Server minus local time: the middle of what the samples allow, and half that range."""

    offset_s: float
    error_s: float
    samples: int


class ClockOffset:
    """Thread-safe: writers observe from their threads, collectors read the correction."""

    def __init__(
        self,
        *,
        tolerance_s: float = 2.0,
        correct: bool = True,
        max_samples: int = 64,
        wall: Callable[[], int] = time.time_ns,
    ) -> None:
        self.tolerance_ns = int(tolerance_s * _SECOND_NS)
        self.correct = correct  # False: measure and report only
        self.wall = wall  # the clock that stamps points, and so the one to measure
        self._bounds: deque[tuple[int, int]] = deque(maxlen=max_samples)
        self._correction_ns = 0
        self._lock = threading.Lock()

    def observe(self, sent_ns: int, received_ns: int, date_header: str | None) -> None:
        """One answer: sent and received by :attr:`wall`, and the server's ``Date`` header."""
        server_s = parse_http_date(date_header)
        if server_s is None or received_ns < sent_ns:
            return
        server_ns = server_s * _SECOND_NS
        with self._lock:
            self._bounds.append((server_ns - received_ns, server_ns + _SECOND_NS - sent_ns))
            self._drop_inconsistent()
            self._update_correction()

    def estimate(self) -> OffsetEstimate | None:
        with self._lock:
            if not self._bounds:
                return None
            low, high = self._intersection()
            return OffsetEstimate((low + high) / 2e9, (high - low) / 2e9, len(self._bounds))

    def correction_ns(self) -> int:
        """What to add to a local stamp: 0 unless the offset is known to be past tolerance."""
        with self._lock:
            return self._correction_ns

    def _intersection(self) -> tuple[int, int]:
        low = max(bound[0] for bound in self._bounds)
        high = min(bound[1] for bound in self._bounds)
        return low, high

    def _drop_inconsistent(self) -> None:
        """Keeps the newest samples that agree with each other (a stepped clock breaks that)."""
        low, high = self._bounds[-1]
        keep = 1
        for older_low, older_high in reversed(list(self._bounds)[:-1]):
            low, high = max(low, older_low), min(high, older_high)
            if low > high:
                break
            keep += 1
        while len(self._bounds) > keep:
            self._bounds.popleft()

    def _update_correction(self) -> None:
        if not self.correct:
            return
        low, high = self._intersection()
        middle = (low + high) // 2
        if self._correction_ns == 0:
            if low > self.tolerance_ns or high < -self.tolerance_ns:
                self._correction_ns = middle
        elif abs(middle) <= self.tolerance_ns // 2:
            self._correction_ns = 0
        else:
            self._correction_ns = middle


def parse_http_date(value: str | bytes | None) -> int | None:
    """Seconds since the epoch from an HTTP date (``Sun, 29 Nov 2026 17:05:04 GMT``)."""
    if not value:
        return None
    text = value.decode(errors="replace") if isinstance(value, bytes) else value
    parsed = email.utils.parsedate_tz(text)
    if parsed is None:
        return None
    try:
        return int(email.utils.mktime_tz(parsed))
    except (OverflowError, ValueError):
        return None


def http_date(time_ns: int) -> str:
    """The ``Date`` header a server whose clock reads ``time_ns`` sends (whole seconds)."""
    return email.utils.formatdate(time_ns // _SECOND_NS, usegmt=True)
