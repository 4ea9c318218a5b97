"""Job-level symptoms that start a localization: step-time regression and hangs.

Explicit errors need no detector: an event point is the trigger.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from reflex_localize.flows.state_upgrade import FieldsFilledOnRestore

# A window whose step time is at least twice the job's level is a pause (a checkpoint the
# hook did not mark, an evaluation pass), not yet a slowdown.
PAUSE_LOG = math.log(2.0)


@dataclass
class StepRegression(FieldsFilledOnRestore):
    """CUSUM change-point detector on a job's log step time against its own baseline.

    A change point, not a fixed threshold: the job's own typical step time and its jitter
    (sequence-length noise) set the scale. One window's increment is capped, so a single
    checkpoint pause cannot trigger it; a sustained slowdown does within a few windows.
    Windows that look anomalous are kept out of the baseline.

    A pause counts only once the window after it is a pause too: a job that comes back from
    its unmarked checkpoint did not slow. (A soak named a GPU whose 40 s throttle slowed two
    windows 5-7% right after a checkpoint's: the capped pause had given the CUSUM most of its
    threshold.) The held increment counts once the pause holds, so a job that stays at half
    speed or worse is caught as soon as before.

    >>> r = StepRegression(warmup=5)
    >>> [r.update(1.0 + 0.01 * (i % 3)) for i in range(8)][-1]
    False
    >>> any(r.update(1.3) for _ in range(5))
    True
    >>> p = StepRegression(warmup=5)
    >>> [p.update(1.0) for _ in range(8)][-1], p.update(4.0), p.cusum, p.update(4.0), p.cusum
    (False, False, 0.0, False, 6.0)
    """

    warmup: int = 6
    slack: float = 0.5
    threshold: float = 8.0
    max_increment: float = 3.0
    floor: float = 0.02  # log units: 2% step-time jitter is always tolerated
    count: int = 0
    mean: float = 0.0
    var: float = 0.0
    cusum: float = 0.0
    pending: float = 0.0  # a lone pause's increment, counted if the next window pauses too
    pausing: bool = False  # the windows before were a pause that held

    def deviation(self, step_time: float) -> float:
        if self.count < self.warmup:
            return 0.0
        return (math.log(step_time) - self.mean) / max(math.sqrt(self.var), self.floor)

    def update(self, step_time: float) -> bool:
        if not step_time > 0:
            return False
        # The log taken once, z as deviation() gives it: every rank's ratio comes through
        # here every step (flows/judge/rank_drift.py), so the calls add up.
        log_step = math.log(step_time)
        z = 0.0
        if self.count >= self.warmup:
            z = (log_step - self.mean) / max(math.sqrt(self.var), self.floor)
            increment = min(z - self.slack, self.max_increment)
            pause = log_step - self.mean >= PAUSE_LOG
            if pause and not self.pausing and self.pending == 0.0:
                self.pending = increment
                return False
            self.pausing = pause
            held, self.pending = (self.pending if pause else 0.0), 0.0
            self.cusum = max(0.0, self.cusum + held + increment)
        if abs(z) < 3.0:
            self._learn(log_step)
        return self.cusum > self.threshold

    def _learn(self, x: float) -> None:
        self.count += 1
        alpha = 1.0 / min(self.count, 60)
        delta = x - self.mean
        self.mean += alpha * delta
        self.var = (1 - alpha) * (self.var + alpha * delta * delta)

    def reset(self) -> None:
        self.cusum, self.pending, self.pausing = 0.0, 0.0, False

    def level(self) -> float:
        """The job's learned typical step time (seconds); 0 while warming up."""
        return math.exp(self.mean) if self.count >= self.warmup else 0.0


@dataclass
class HangDetector:
    """No step progress for ``timeout_s`` (or three of the job's own steps, when they are
    longer: a job of 47 s steps is not hung after 60 s) while its nodes still send telemetry.

    >>> h = HangDetector(timeout_s=30)
    >>> h.update(max_step=10, alive=True, now_ns=0)
    False
    >>> h.update(max_step=10, alive=True, now_ns=40 * 10**9)
    True
    >>> h.told
    'no step for 40 s (patience 30 s: the 30 s floor)'
    >>> slow = HangDetector(timeout_s=30)
    >>> slow.update(max_step=10, alive=True, now_ns=0, step_s=47.0)
    False
    >>> slow.update(max_step=10, alive=True, now_ns=100 * 10**9)
    False

    Seconds the job spent writing a checkpoint (its GPUs idle, its hosts writing:
    flows/signals/job_pause.py) do not count against its patience, up to ``writing_cap_s``:

    >>> ckpt = HangDetector(timeout_s=30)
    >>> ckpt.update(max_step=10, alive=True, now_ns=0)
    False
    >>> ckpt.update(max_step=10, alive=True, now_ns=40 * 10**9, paused_s=25.0)
    False
    >>> ckpt.update(max_step=10, alive=True, now_ns=50 * 10**9)
    False
    >>> ckpt.update(max_step=10, alive=True, now_ns=60 * 10**9)
    True
    >>> ckpt.told
    'no step for 60 s, 25 s of it writing a checkpoint (patience 30 s: the 30 s floor)'
    """

    timeout_s: float = 60.0
    steps_allowed: float = 3.0
    last_step: int = -1
    last_progress_ns: int = -1
    fired: bool = False
    recent_steps: list[float] = field(default_factory=list)  # the job's recent step times
    # The longest stall the job came back from by itself (a checkpoint, an evaluation pass):
    # a pause it takes routinely is its rhythm, not a hang.
    longest_pause_s: float = 0.0
    # Why it fired, for the event: the stall it saw and the patience it had run out of.
    told: str = ""
    # Seconds since the last step the job spent writing a checkpoint: not a stall.
    writing_s: float = 0.0
    # A checkpoint still being written after this long is a hang too (storage that crawls).
    writing_cap_s: float = 1800.0

    @property
    def step_s(self) -> float:
        """The job's typical step time: the median of its recent ones (a checkpoint's long
        step does not stretch the patience for good)."""
        return float(statistics.median(self.recent_steps)) if self.recent_steps else 0.0

    def update(
        self, max_step: int, alive: bool, now_ns: int, step_s: float = 0.0, paused_s: float = 0.0
    ) -> bool:
        if step_s > 0:
            self.recent_steps = [*self.recent_steps, step_s][-20:]
        if max_step > self.last_step:
            if self.last_progress_ns >= 0 and not self.fired:
                # The whole pause, writing included: patience grows with what the job does
                # routinely even where part of its checkpoint was not seen as writing.
                pause = (now_ns - self.last_progress_ns) / 1e9
                self.longest_pause_s = max(self.longest_pause_s, pause)
            self.last_step, self.last_progress_ns, self.fired = max_step, now_ns, False
            self.writing_s = 0.0
            return False
        if self.last_progress_ns < 0 or not alive or self.fired:
            return False
        self.writing_s += paused_s
        patience = (self.timeout_s, self.steps_allowed * self.step_s, 1.5 * self.longest_pause_s)
        timeout = max(patience)
        stalled = (now_ns - self.last_progress_ns) / 1e9
        writing = min(self.writing_s, self.writing_cap_s, stalled)
        if stalled - writing < timeout:
            return False
        self.fired = True
        reason = (
            f"the {self.timeout_s:.0f} s floor",
            f"{self.steps_allowed:.0f} of its {self.step_s:.0f} s steps",
            f"1.5 times the longest pause it came back from, {self.longest_pause_s:.0f} s",
        )[patience.index(timeout)]
        of_it = f", {writing:.0f} s of it writing a checkpoint" if writing >= 1 else ""
        self.told = f"no step for {stalled:.0f} s{of_it} (patience {timeout:.0f} s: {reason})"
        return True
