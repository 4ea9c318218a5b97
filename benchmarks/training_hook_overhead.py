"""Cost of the training hook on the training thread, per step (target: < 20 µs).

Measures ``hook.step()`` alone, and a full instrumented step (the five named sections, the
``compute``/``comm`` phases and ``step()``), against:

- the node agent's socket, with a real :class:`~collectors.hook_receiver.HookReceiver`
  listening (the default deployment);
- no agent at all (the socket absent: every flush fails, records are counted as dropped);
- a sink that takes 200 ms per batch (InfluxDB slow, for the ``REFLEX_HOOK_SINK=influx``
  opt-in), to show the training thread does not wait for it;
- the agent's socket with sections timed by CUDA events (issue 39), on a fake ``torch.cuda``
  whose events cost nothing: the hook's own bookkeeping (pool, pending steps, ``query``,
  ``elapsed_time``). A real ``Event.record()`` adds a few µs per event (not measured here), two per
  section; ``benchmarks/real_gpu_check.py`` measures it on a GPU.

    .venv/bin/python benchmarks/training_hook_overhead.py --calls 100000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reflex_localize.collectors.cuda_fake import FakeCuda
from reflex_localize.collectors.hook_receiver import HookReceiver
from reflex_localize.collectors.section_timers import CudaSectionTimer
from reflex_localize.collectors.training_hook import SECTIONS, TrainingHook

TARGET_US = 20.0
# A real step lasts 0.1-10 s; a burst of back-to-back steps makes the hook's thread compete
# with the measured one for the GIL, which no training run does. Paced calls show both.
PACE_S = 0.0002


def measure(call: Callable[[], None], calls: int, pause_s: float = 0.0) -> list[float]:
    """µs per call; ``pause_s`` between calls (not timed)."""
    costs = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        started = clock()
        call()
        costs.append((clock() - started) / 1000)
        if pause_s:
            time.sleep(pause_s)
    return costs


def report(label: str, costs: list[float]) -> None:
    costs.sort()
    p99 = costs[int(len(costs) * 0.99)]
    mean, median = statistics.fmean(costs), costs[len(costs) // 2]
    verdict = "ok" if mean < TARGET_US else f"OVER {TARGET_US:.0f} µs"
    print(
        f"{label:<52} mean {mean:6.2f} µs  median {median:6.2f} µs"
        f"  p99 {p99:6.2f} µs  max {costs[-1]:8.1f} µs  {verdict}"
    )


def run(label: str, calls: int, **sink: Any) -> int:
    """Measures one configuration; returns the lines the hook sent."""
    hook = TrainingHook(job="bench", rank=0, world_size=8, cluster="c", node="n",
                        max_queue=calls * 2, max_retry_lines=calls * 2, **sink)  # fmt: skip
    sections = [hook.section(name) for name in SECTIONS]

    def instrumented() -> None:
        for section in sections:
            with section:
                pass
        with hook.compute:
            pass
        with hook.comm:
            pass
        hook.step(tokens=4096, loss=2.0)

    report(f"step() [{label}]", measure(lambda: hook.step(tokens=4096), calls))
    report(f"5 sections+compute+comm+step() [{label}]", measure(instrumented, calls))
    paced = measure(instrumented, calls // 5, pause_s=PACE_S)
    report(f"the same, {PACE_S * 1e6:.0f} µs apart [{label}]", paced)
    hook.close(timeout_s=30)
    stats = hook.stats
    print(f"  sent {stats.sent_lines} lines, dropped {stats.dropped}, send errors "
          f"{stats.send_errors}")  # fmt: skip
    return stats.sent_lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    path = str(folder / "hook.sock")
    receiver = HookReceiver("c", "n", path=path, max_queued_points=args.calls * 3)
    receiver.start_background(lambda points: None)
    sent = run("agent socket", args.calls, env={"REFLEX_HOOK_SOCKET": path})
    receiver.wait_for(sent, timeout_s=30)
    print(f"  the agent received {receiver.received_lines} lines, refused {receiver.parse_errors}")
    timer = CudaSectionTimer(FakeCuda())
    sent += run("agent socket, CUDA events (fake)", args.calls, section_timer=timer,
                env={"REFLEX_HOOK_SOCKET": path})  # fmt: skip
    receiver.wait_for(sent, timeout_s=30)
    receiver.stop_background()
    run("no agent (socket absent)", args.calls, env={"REFLEX_HOOK_SOCKET": path})
    run("influx opt-in, sink taking 200 ms", args.calls, sink=lambda batch: time.sleep(0.2))


if __name__ == "__main__":
    main()
