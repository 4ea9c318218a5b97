"""Exponential backoff with jitter that never retries sooner than the server's Retry-After.

>>> clock = iter([0.0, 0.0, 50.0]).__next__
>>> backoff = Backoff(initial_s=1.0, max_s=8.0, clock=clock, jitter=0.0)
>>> backoff.failed(retry_after_s=30.0)  # the server's wish wins over our 1 s
30.0
>>> backoff.ready(), backoff.ready()
(False, True)
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable


class Backoff:
    def __init__(
        self,
        *,
        initial_s: float = 0.5,
        max_s: float = 8.0,
        clock: Callable[[], float] = time.monotonic,
        jitter: float = 0.2,
    ) -> None:
        self.initial_s, self.max_s, self.jitter = initial_s, max_s, jitter
        self._clock = clock
        self._random = random.Random()
        self.failures = 0
        self.not_before = 0.0

    def ready(self) -> bool:
        return self._clock() >= self.not_before

    def wait_s(self) -> float:
        return max(0.0, self.not_before - self._clock())

    def failed(self, retry_after_s: float | None = None) -> float:
        """Records a failure; returns the delay before the next attempt."""
        delay = min(self.max_s, self.initial_s * 2**self.failures)
        # Jitter keeps a fleet of collectors from reconnecting in lockstep after an outage.
        delay *= 1.0 + self.jitter * (2 * self._random.random() - 1)
        if retry_after_s is not None:
            delay = max(delay, retry_after_s)
        self.failures += 1
        self.not_before = self._clock() + delay
        return delay

    def succeeded(self) -> None:
        self.failures, self.not_before = 0, 0.0
