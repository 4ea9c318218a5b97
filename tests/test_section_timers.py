"""The training hook's GPU-time sections: CUDA events read a step later, never a synchronize,
CPU clocks as the fallback, and every record saying which timer it used (issue 39)."""

from __future__ import annotations

import sys
import time
import types
from typing import Any

import pytest

from reflex_localize.collectors.cuda_fake import FakeCuda
from reflex_localize.collectors.section_timers import CudaSectionTimer, cuda_in_use
from reflex_localize.collectors.training_hook import TrainingHook
from reflex_localize.schemas.codec import DecodeReport, Point, decode_lines


def steps_in(batches: list[str]) -> list[Point]:
    report = DecodeReport()
    points = list(decode_lines("".join(batches).splitlines(), report))
    assert report.rejected_total == 0, report.examples
    return [p for p in points if p.measurement == "train_step"]


def hook_on(batches: list[str], **options: Any) -> TrainingHook:
    return TrainingHook(job="j", rank=0, world_size=1, cluster="c", node="n", env={},
                        sink=batches.append, flush_interval_s=0.01, **options)  # fmt: skip


def gpu_step(hook: TrainingHook, cuda: FakeCuda, forward_ms: float, backward_ms: float) -> None:
    """A step whose kernels are queued on the stream; the CPU returns at once, as with CUDA."""
    with hook.section("forward"):
        cuda.launch(forward_ms)
    with hook.section("backward"):
        cuda.launch(backward_ms)
    hook.step(tokens=1024)


def sent(hook: TrainingHook, batches: list[str], steps: int) -> list[Point]:
    deadline = time.monotonic() + 5
    while len(steps_in(batches)) < steps and time.monotonic() < deadline:
        time.sleep(0.01)
    return steps_in(batches)


@pytest.fixture
def torch_with(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Installs a fake ``torch`` whose ``cuda`` is the given fake; the hook finds it itself."""

    def install(cuda: FakeCuda | None) -> None:
        monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))

    return install


def test_gpu_time_is_reported_one_step_late_and_right(torch_with: Any) -> None:
    cuda = FakeCuda()
    torch_with(cuda)
    batches: list[str] = []
    hook = hook_on(batches)
    hook.step()  # the step that sees CUDA in use: the next one is timed by events
    gpu_step(hook, cuda, forward_ms=60.0, backward_ms=110.0)
    time.sleep(0.05)
    assert [p.fields["step"] for p in steps_in(batches)] == [1], "step 2: GPU still running"
    cuda.run()  # the GPU finishes step 2 while the CPU queues step 3
    gpu_step(hook, cuda, forward_ms=60.0, backward_ms=110.0)
    step2 = sent(hook, batches, 2)[1]
    assert step2.fields["step"] == 2 and step2.fields["section_timer"] == "cuda_events"
    assert step2.fields["forward_seconds"] == pytest.approx(0.060)
    assert step2.fields["backward_seconds"] == pytest.approx(0.110)
    assert step2.fields["compute_seconds"] == pytest.approx(0.170)
    assert float(step2.fields["tokens_per_second"]) > 0
    assert cuda.synchronize_calls == 0, "the training thread never waits for the GPU"
    hook.close()  # the last step is read at close (the GPU has not run it: CPU times)
    last = steps_in(batches)[-1]
    assert last.fields["step"] == 3 and last.fields["section_timer"] == "cpu"
    assert float(last.fields["compute_seconds"]) < 0.01, "launch time, not 170 ms of GPU work"


def test_events_are_reused_once_read(torch_with: Any) -> None:
    cuda = FakeCuda()
    torch_with(cuda)
    hook = hook_on([])
    hook.step()
    for _ in range(50):
        gpu_step(hook, cuda, 1.0, 2.0)
        cuda.run()
    hook.close()
    assert cuda.events_created <= 8, "a pool: four events a step, read a step later"


def test_nothing_blocks_when_the_gpu_falls_far_behind() -> None:
    """A GPU that never finishes: steps end at CPU speed, and past the pending bound each is
    written with CPU times rather than held (memory stays bounded)."""
    cuda = FakeCuda()
    batches: list[str] = []
    hook = hook_on(batches, section_timer=CudaSectionTimer(cuda, max_pending_steps=4))
    started = time.perf_counter()
    for _ in range(20):
        gpu_step(hook, cuda, 500.0, 500.0)
    assert time.perf_counter() - started < 0.5
    hook.close(timeout_s=0.1)
    steps = steps_in(batches)
    assert [p.fields["step"] for p in steps] == list(range(1, 21)), "none lost, in order"
    assert {p.fields["section_timer"] for p in steps} == {"cpu"}
    assert cuda.synchronize_calls == 0


def test_a_section_inside_a_graph_capture_falls_back_to_cpu() -> None:
    cuda = FakeCuda()
    batches: list[str] = []
    hook = hook_on(batches, section_timer=CudaSectionTimer(cuda))
    cuda.capturing = True
    gpu_step(hook, cuda, 5.0, 5.0)
    cuda.capturing = False
    cuda.run()
    gpu_step(hook, cuda, 5.0, 5.0)
    cuda.run()
    hook.close()
    timers = [p.fields["section_timer"] for p in steps_in(batches)]
    assert timers == ["cpu", "cuda_events"]


def test_without_torch_or_cuda_the_hook_keeps_cpu_timers(torch_with: Any) -> None:
    for cuda in (None, FakeCuda(initialized=False)):
        torch_with(cuda)  # torch without CUDA, or torch training on CPU
        assert cuda_in_use() is None
        batches: list[str] = []
        hook = hook_on(batches)
        for _ in range(3):
            with hook.section("forward"):
                time.sleep(0.001)
            hook.step()
        hook.close()
        steps = steps_in(batches)
        assert [p.fields["section_timer"] for p in steps] == ["cpu"] * 3
        assert float(steps[0].fields["forward_seconds"]) >= 0.001


def test_no_torch_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert cuda_in_use() is None
    batches: list[str] = []
    hook = hook_on(batches)
    with hook.compute:
        pass
    hook.step()
    hook.close()
    (step,) = steps_in(batches)
    assert step.fields["section_timer"] == "cpu"


def test_a_step_without_sections_says_nothing_about_timers() -> None:
    batches: list[str] = []
    hook = hook_on(batches)
    hook.step()
    hook.close()
    (step,) = steps_in(batches)
    assert "section_timer" not in step.fields


def test_the_optimizer_section_through_attach_is_gpu_timed() -> None:
    cuda = FakeCuda()
    batches: list[str] = []
    hook = hook_on(batches, section_timer=CudaSectionTimer(cuda))

    class Optimizer:
        def __init__(self) -> None:
            self.pre: list[Any] = []
            self.post: list[Any] = []

        def register_step_pre_hook(self, fn: Any) -> None:
            self.pre.append(fn)

        def register_step_post_hook(self, fn: Any) -> None:
            self.post.append(fn)

        def step(self) -> None:
            for fn in self.pre:
                fn(self, (), {})
            cuda.launch(30.0)
            for fn in self.post:
                fn(self, (), {})

    optimizer = Optimizer()
    hook.attach(optimizer)
    optimizer.step()
    cuda.run()
    optimizer.step()
    cuda.run()
    hook.close()
    first = steps_in(batches)[0]
    assert first.fields["optimizer_seconds"] == pytest.approx(0.030)
    assert first.fields["section_timer"] == "cuda_events"
