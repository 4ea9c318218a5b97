"""A fake ``torch.cuda`` for the hook's CUDA-event section timer, in tests and benchmarks.

One stream whose work runs only when told: :meth:`FakeCuda.launch` queues GPU milliseconds,
:meth:`FakeCuda.run` lets the GPU catch up. An event records the stream's queued end; it has
completed once the GPU has run past it, and ``elapsed_time`` refuses an event that has not, as
CUDA does. ``synchronize`` is counted so a test can say the training thread never waited.

>>> cuda = FakeCuda()
>>> start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
>>> start.record(); cuda.launch(40.0); end.record()
>>> end.query()
False
>>> cuda.run(); end.query(), start.elapsed_time(end)
(True, 40.0)
"""

from __future__ import annotations


class FakeCuda:
    """See the module docstring."""

    def __init__(self, *, initialized: bool = True) -> None:
        self.initialized = initialized
        self.capturing = False
        self.queued_ms = 0.0  # where the stream's queued work ends, in GPU time
        self.done_ms = 0.0  # how far the GPU has run
        self.events_created = 0
        self.synchronize_calls = 0

    def is_initialized(self) -> bool:
        return self.initialized

    def is_current_stream_capturing(self) -> bool:
        return self.capturing

    def Event(self, enable_timing: bool = False) -> FakeEvent:
        self.events_created += 1
        return FakeEvent(self, enable_timing)

    def launch(self, ms: float) -> None:
        """Queues a kernel of ``ms`` GPU milliseconds on the stream; returns at once."""
        self.queued_ms += ms

    def run(self, ms: float | None = None) -> None:
        """Lets the GPU run ``ms`` milliseconds of queued work (all of it by default)."""
        target = self.queued_ms if ms is None else self.done_ms + ms
        self.done_ms = min(self.queued_ms, target)

    def synchronize(self) -> None:
        self.synchronize_calls += 1
        self.run()


class FakeEvent:
    """``torch.cuda.Event``: ``record``, ``query`` and ``elapsed_time`` (milliseconds)."""

    def __init__(self, cuda: FakeCuda, enable_timing: bool) -> None:
        self._cuda, self._timing = cuda, enable_timing
        self.at_ms: float | None = None

    def record(self) -> None:
        self.at_ms = self._cuda.queued_ms

    def query(self) -> bool:
        return self.at_ms is None or self._cuda.done_ms >= self.at_ms

    def elapsed_time(self, end: FakeEvent) -> float:
        if not self._timing or self.at_ms is None or end.at_ms is None:
            raise RuntimeError("Both events must be recorded with enable_timing=True")
        if not (self.query() and end.query()):
            raise RuntimeError("CUDA error: device not ready")
        return end.at_ms - self.at_ms
