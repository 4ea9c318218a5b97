"""How the training hook times its sections: CPU clocks, or CUDA events read a step later.

Standard library only; torch is never imported here. CUDA kernels run asynchronously, so a CPU
clock around ``forward`` measures kernel launches and the GPU work lands wherever the next
synchronization happens (the issue-39 H200 loop: 6 ms of a 171 ms step). When the training
process has initialized CUDA (``torch`` already imported and ``torch.cuda.is_initialized()``),
:func:`cuda_in_use` returns ``torch.cuda`` and the hook switches to :class:`CudaSectionTimer`:
an event recorded on the current stream at each section's entry and exit, read at a later
``step()`` with ``event.query()`` and ``start.elapsed_time(end)``, never ``synchronize()``, so a
step's record leaves one step (or, when the CPU runs further ahead, a few steps) late with GPU
times. NVIDIA's straggler detection (NVRx) times its sections the same way.

A section on the current stream measures when that stream reached its entry and its exit: the
GPU time of the kernels the section launched there, plus any wait the stream was made to do
(a blocking collective's ``work.wait()`` makes it wait for NCCL's stream, so ``comm`` includes
waiting for peers, as on CPU).

The CPU times are always kept too: a step whose events cannot be read (recorded during CUDA
graph capture, still not done after ``max_pending_steps`` more steps, an error) is written with
them, and every record says which timer its times came from (``section_timer``).

>>> timer = CpuSectionTimer()
>>> token = timer.enter(); timer.exit(0, token)
>>> timer.end_step("step 1", [0.25])
[('step 1', [0.25], 'cpu')]
"""

from __future__ import annotations

import sys
import time
from collections import deque
from typing import Any, Protocol

CPU = "cpu"
CUDA_EVENTS = "cuda_events"
# (the hook's record of a step, its seconds per phase, the timer they came from)
Resolved = tuple[Any, list[float], str]


class SectionTimer(Protocol):
    """What the hook asks of a timer; the hook keeps the CPU times itself."""

    name: str

    def enter(self) -> Any: ...
    def exit(self, index: int, token: Any) -> None: ...
    def end_step(self, record: Any, cpu_seconds: list[float]) -> list[Resolved]: ...
    def drain(self, wait_s: float) -> list[Resolved]: ...


class CpuSectionTimer:
    """The fallback: the hook's own CPU times, ready at once."""

    name = CPU

    def enter(self) -> None:
        return None

    def exit(self, index: int, token: Any) -> None:
        pass

    def end_step(self, record: Any, cpu_seconds: list[float]) -> list[Resolved]:
        return [(record, cpu_seconds, CPU)]

    def drain(self, wait_s: float) -> list[Resolved]:
        return []


def cuda_in_use() -> Any | None:
    """``torch.cuda`` when the training process has already initialized CUDA, else None.

    Never imports torch, and never initializes CUDA: a process that imported torch but trains
    on CPU keeps CPU timers (recording an event would create a CUDA context on GPU 0)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is not None and cuda.is_initialized():
            return cuda
    except Exception:
        pass
    return None


class CudaSectionTimer:
    """Sections timed by CUDA events on the current stream; see the module docstring.

    ``cuda`` is ``torch.cuda`` or anything with ``Event(enable_timing=True)`` (events with
    ``record()``, ``query()`` and ``elapsed_time(end)`` in milliseconds) and
    ``is_current_stream_capturing()``. Events are pooled and reused once read.
    """

    name = CUDA_EVENTS

    def __init__(self, cuda: Any, *, max_pending_steps: int = 8) -> None:
        self._cuda = cuda
        self._max_pending = max_pending_steps
        self._free: list[Any] = []
        self._pairs: list[tuple[int, Any, Any]] = []  # this step's (phase, start, end)
        self._complete = True  # every section of this step has its events
        # Steps ended but not yet read: (record, CPU seconds, pairs, complete)
        self._pending: deque[tuple[Any, list[float], list[tuple[int, Any, Any]], bool]] = deque()

    def enter(self) -> Any:
        try:
            if self._cuda.is_current_stream_capturing():  # an event would break the capture
                return None
            start = self._free.pop() if self._free else self._cuda.Event(enable_timing=True)
            start.record()
            return start
        except Exception:
            return None

    def exit(self, index: int, token: Any) -> None:
        if token is None:
            self._complete = False
            return
        try:
            end = self._free.pop() if self._free else self._cuda.Event(enable_timing=True)
            end.record()
        except Exception:
            self._complete = False
            return
        self._pairs.append((index, token, end))

    def end_step(self, record: Any, cpu_seconds: list[float]) -> list[Resolved]:
        self._pending.append((record, cpu_seconds, self._pairs, self._complete))
        self._pairs, self._complete = [], True
        return self._ready()

    def drain(self, wait_s: float) -> list[Resolved]:
        """At close: polls (no synchronize) for up to ``wait_s``; what is left gets CPU times."""
        resolved = self._ready()
        deadline = time.monotonic() + wait_s
        while self._pending and time.monotonic() < deadline:
            time.sleep(0.001)
            resolved += self._ready()
        while self._pending:
            record, cpu_seconds, _pairs, _complete = self._pending.popleft()
            resolved.append((record, cpu_seconds, CPU))
        return resolved

    def _ready(self) -> list[Resolved]:
        """The oldest steps whose events have all completed, in order."""
        resolved: list[Resolved] = []
        while self._pending:
            record, cpu_seconds, pairs, complete = self._pending[0]
            if complete and not self._done(pairs):
                if len(self._pending) <= self._max_pending:
                    break  # the GPU is behind: next step
                complete = False  # too far behind: CPU times, so memory stays bounded
            self._pending.popleft()
            gpu_seconds = self._read(pairs, len(cpu_seconds)) if complete else None
            if gpu_seconds is None:
                resolved.append((record, cpu_seconds, CPU))
            else:
                resolved.append((record, gpu_seconds, CUDA_EVENTS))
        return resolved

    @staticmethod
    def _done(pairs: list[tuple[int, Any, Any]]) -> bool:
        try:
            return all(end.query() for _index, _start, end in reversed(pairs))
        except Exception:
            return True  # _read fails the same way and falls back to CPU times

    def _read(self, pairs: list[tuple[int, Any, Any]], phases: int) -> list[float] | None:
        seconds = [0.0] * phases
        try:
            for index, start, end in pairs:
                elapsed_ms = float(start.elapsed_time(end))
                if not elapsed_ms >= 0.0:  # NaN or negative: events on different streams
                    return None
                seconds[index] += elapsed_ms / 1000
        except Exception:
            return None
        for _index, start, end in pairs:  # read: free to record again
            self._free += (start, end)
        return seconds
