"""Real-GPU check (issue 39): a real fail-slow on a real NVIDIA GPU, found by the flow.

Not part of ``make test``: it needs an NVIDIA GPU, its driver, PyTorch with CUDA and
``nvidia-smi`` (root for the clock lock). Run from the project's root::

    .venv/bin/python benchmarks/real_gpu_check.py --out /tmp/real --run-s 300 --fault-s 170

1. records what NVML answers on this machine (``--record-nvml``, default OUT/nvml-recorded.json:
   a fixture for tests/fixtures/nvml/, see collectors/nvml_recorded.py);
2. starts the agent, ``reflex collect --stdout``, into OUT/real.lp (its hook socket in OUT);
3. trains a bf16 MLP on GPU ``--gpu`` with the training hook (``attach(optimizer)``, forward and
   backward sections), one rank. The first ``--overhead-s`` alternate blocks of steps with and
   without a hook (its overhead; a short job of its own); then job ``real-gpu-check`` runs with
   the hook, and every ``--check-every``-th step also waits for the GPU at the end of each
   section (``torch.cuda.synchronize()``), a wall-clock reference for the hook's CUDA-event
   compute time of that step. Every step starts and ends with an idle GPU (synchronized), so
   step times are the GPU's and the hook's CPU cost shows in them;
4. at ``--fault-s`` slows that GPU for real: clocks locked at ``--lock-mhz`` (``nvidia-smi -lgc``)
   where permitted, else its power limit at its minimum, else a competing process on it; undone
   at the end;
5. replays the capture with ``reflex flow --source file:OUT/real.lp`` and prints the verdict
   (an event within 60 s of the slowdown naming that GPU, with its clock), the hook's GPU-time
   accuracy, its overhead, and the GPU collector's CPU per cycle scaled to eight GPUs.

``--dry-run`` checks what it can without a GPU and prints the plan. The summary is also
written to OUT/summary.json. The reference scripts it grew from (issue 39's first run) were
``fail_slow.sh``, ``train_fault.py`` and ``nvml_summary.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

JOB = "real-gpu-check"
DETECT_WITHIN_S = 60.0
ACCURACY_TOLERANCE = 0.10
OVERHEAD_LIMIT = 0.01
COLLECTOR_TARGET = 0.005  # of one core, eight GPUs at 1 s


@dataclass
class TrainResult:
    steps: int = 0  # of the measured job (after the overhead minute)
    fault: str = "none"
    fault_ns: int = 0
    step_s_before: list[float] = field(default_factory=list)
    step_s_after: list[float] = field(default_factory=list)
    synchronized: dict[int, float] = field(default_factory=dict)  # hook step -> compute s
    with_hook_s: list[float] = field(default_factory=list)
    without_hook_s: list[float] = field(default_factory=list)


def nvidia_smi(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=30)


class Slowdown:
    """The fault: a clock lock, else a power cap, else a competing process; ``undo`` restores."""

    def __init__(self, gpu: int, lock_mhz: int, choice: str) -> None:
        self.gpu, self.lock_mhz, self.choice = gpu, lock_mhz, choice
        self.kind = "none"
        self._hog: subprocess.Popen[bytes] | None = None
        self._power_limit: str | None = None

    def apply(self) -> str:
        index = str(self.gpu)
        lock = f"{self.lock_mhz},{self.lock_mhz}"
        locked = self.choice in ("auto", "clocks") and nvidia_smi("-i", index, "-lgc", lock)
        if locked and locked.returncode == 0:
            self.kind = f"clocks locked at {self.lock_mhz} MHz"
            return self.kind
        if self.choice in ("auto", "power"):
            query = nvidia_smi("-i", index, "--query-gpu=power.limit,power.min_limit",
                               "--format=csv,noheader,nounits")  # fmt: skip
            current, _, minimum = (text.strip() for text in query.stdout.partition(","))
            capped = query.returncode == 0 and minimum and nvidia_smi("-i", index, "-pl", minimum)
            if capped and capped.returncode == 0:
                self._power_limit = current
                self.kind = f"power limit {minimum} W (was {current} W)"
                return self.kind
        code = (f"import torch\na = torch.randn(8192, 8192, device='cuda:{self.gpu}')\n"
                "while True:\n    a @ a")  # fmt: skip
        self._hog = subprocess.Popen([sys.executable, "-c", code])
        self.kind = "competing GPU process"
        return self.kind

    def undo(self) -> None:
        index = str(self.gpu)
        if self.kind.startswith("clocks"):
            nvidia_smi("-i", index, "-rgc")
        if self._power_limit:
            nvidia_smi("-i", index, "-pl", self._power_limit)
        if self._hog is not None:
            self._hog.kill()
            self._hog.wait()


def record_nvml(path: Path) -> int:
    from reflex_localize.collectors.nvml_api import PynvmlApi
    from reflex_localize.collectors.nvml_recorded import record

    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    recording = record(PynvmlApi(), source=f"CAPTURED from NVML by real_gpu_check.py, {stamp}")
    path.write_text(json.dumps(recording, indent=1) + "\n")
    return len(recording["gpus"])


def train(args: argparse.Namespace, slowdown: Slowdown) -> TrainResult:
    """The PyTorch loop (see the module docstring); torch is imported here only."""
    import torch

    from reflex_localize.collectors.training_hook import TrainingHook

    device = torch.device("cuda", args.gpu)
    torch.cuda.set_device(device)
    layers = [torch.nn.Linear(args.width, args.width) for _ in range(args.layers)]
    model = torch.nn.Sequential(*layers).to(device, torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randn(args.batch, args.width, device=device, dtype=torch.bfloat16)

    def step(hook: TrainingHook | None, synchronized: bool = False) -> float:
        """One step, timed from an idle GPU to an idle GPU; ``synchronized``: every section
        waits for its kernels too (the reference for the hook's CUDA-event times)."""
        forward = hook.section("forward") if hook else nullcontext()
        backward = hook.section("backward") if hook else nullcontext()
        torch.cuda.synchronize()
        started = time.perf_counter()
        with forward:
            loss = model(data).float().pow(2).mean()
            if synchronized:
                torch.cuda.synchronize()
        with backward:
            loss.backward()
            if synchronized:
                torch.cuda.synchronize()
        optimizer.step()
        torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        optimizer.zero_grad(set_to_none=True)
        return seconds

    result, began = TrainResult(), time.monotonic()
    # The hook's overhead: blocks of steps with and without it, as a short job of its own (a
    # block without the hook would otherwise show as one long step of the measured job).
    probe = TrainingHook(job=f"{JOB}-overhead", rank=0, world_size=1, local_rank=args.gpu)
    while time.monotonic() - began < args.overhead_s:
        handles = probe.attach(optimizer)
        result.with_hook_s += [step(probe) for _ in range(args.overhead_block)]
        for handle in handles:
            handle.remove()
        result.without_hook_s += [step(None) for _ in range(args.overhead_block)]
    probe.close()
    hook = TrainingHook(job=JOB, rank=0, world_size=1, local_rank=args.gpu)
    hook.attach(optimizer)
    while (elapsed := time.monotonic() - began) < args.run_s:
        if not result.fault_ns and elapsed >= args.fault_s:
            result.fault, result.fault_ns = slowdown.apply(), time.time_ns()
            print(f"slowdown at {elapsed:.0f} s: {result.fault}", flush=True)
        number = result.steps + 1  # the hook's step number for this step
        check = number % args.check_every == 0
        seconds = step(hook, synchronized=check)
        result.steps = number
        if check:
            result.synchronized[number] = seconds
        (result.step_s_after if result.fault_ns else result.step_s_before).append(seconds)
    hook.close()
    return result


def read_capture(path: Path) -> tuple[dict[int, dict[str, Any]], list[dict[str, Any]]]:
    """(train_step fields by step, the gpu collector's self-metrics) from the agent's capture."""
    from reflex_localize.schemas.codec import DecodeReport, decode_lines

    steps: dict[int, dict[str, Any]] = {}
    runs: list[dict[str, Any]] = []
    with path.open(errors="replace") as lines:
        for point in decode_lines(lines, DecodeReport()):
            if point.measurement == "train_step" and point.tags["job"] == JOB:
                steps[int(point.fields["step"])] = dict(point.fields)
            elif point.measurement == "reflex_collector" and point.tags["collector"] == "gpu":
                runs.append(dict(point.fields))
    return steps, runs


def replay(out: Path) -> list[dict[str, Any]]:
    flow = out / "flow"
    shutil.rmtree(flow, ignore_errors=True)
    command = [sys.executable, "-m", "reflex_localize", "flow", "--source",
               f"file:{out / 'real.lp'}", "--sink", "files", "--out", str(flow),
               "--no-recovery", "--shards", "1"]  # fmt: skip
    with (out / "flow.log").open("w") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=1800)
    print(f"flow replay: exit {code.returncode} (log {out / 'flow.log'})")
    events = flow / "events.jsonl"
    return [json.loads(line) for line in events.read_text().splitlines()] if events.exists() else []


def verdict(events: list[dict[str, Any]], fault_ns: int, gpu: int) -> dict[str, Any]:
    """The first event within DETECT_WITHIN_S of the slowdown whose top suspect is the GPU,
    with its clock in the evidence (else the first naming the GPU at all)."""
    naming = []
    for event in sorted(events, key=lambda e: e["time_ns"]):
        after_s = (event["time_ns"] - fault_ns) / 1e9
        top = event["suspects"][0] if event["suspects"] else None
        if not 0 <= after_s <= DETECT_WITHIN_S or top is None:
            continue
        if top["component"] == "gpu" and top["index"] == str(gpu):
            signals = [e["signal"] for e in top["evidence"]]
            clock = any("clock" in s for s in signals) or "clock" in event["summary"]
            naming.append({"found": clock, "after_s": after_s, "signals": signals,
                           "summary": event["summary"]})  # fmt: skip
    found = [n for n in naming if n["found"]]
    if found or naming:
        return (found or naming)[0]
    return {"found": False, "events": len(events), "first": events[0] if events else None}


def accuracy(steps: dict[int, dict[str, Any]], synchronized: dict[int, float]) -> dict[str, Any]:
    errors, timers = [], set()
    for step, seconds in synchronized.items():
        fields = steps.get(step, {})
        timers.add(fields.get("section_timer", "missing"))
        if "compute_seconds" in fields and seconds > 0:
            errors.append(abs(float(fields["compute_seconds"]) - seconds) / seconds)
    if not errors:
        return {"checked": 0, "timers": sorted(timers)}
    return {"checked": len(errors), "timers": sorted(timers),
            "median_error": statistics.median(errors), "max_error": max(errors)}  # fmt: skip


def collector_cost(runs: list[dict[str, Any]], gpus: int) -> dict[str, Any]:
    cpu = sorted(float(r["cpu_seconds"]) for r in runs if "cpu_seconds" in r)
    wall = sorted(float(r["duration_seconds"]) for r in runs)
    if not cpu:
        return {"runs": len(runs)}
    per_gpu = statistics.median(cpu) / max(gpus, 1)
    return {"runs": len(cpu), "gpus": gpus, "cpu_median_s": statistics.median(cpu),
            "cpu_p95_s": cpu[int(len(cpu) * 0.95)], "wall_median_s": statistics.median(wall),
            "eight_gpus_core_share": per_gpu * 8}  # fmt: skip


def preflight(args: argparse.Namespace) -> list[str]:
    """What this machine lacks for the check (an empty list: ready)."""
    problems = []
    if shutil.which("nvidia-smi") is None:
        problems.append("no nvidia-smi on PATH")
    try:
        import torch

        if not torch.cuda.is_available():
            problems.append("torch.cuda.is_available() is False")
    except ImportError:
        problems.append("no PyTorch (pip install torch)")
    try:
        import pynvml  # noqa: F401
    except ImportError:
        problems.append("no nvidia-ml-py (the agent's NVML)")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/real-gpu-check"))
    parser.add_argument("--run-s", type=float, default=300.0)
    parser.add_argument("--fault-s", type=float, default=170.0)
    parser.add_argument("--gpu", type=int, default=0, help="the GPU to train on and slow")
    parser.add_argument("--fault", choices=("auto", "clocks", "power", "process"), default="auto")
    parser.add_argument("--lock-mhz", type=int, default=900)
    parser.add_argument("--check-every", type=int, default=25)
    parser.add_argument("--overhead-s", type=float, default=60.0)
    parser.add_argument("--overhead-block", type=int, default=10)
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16384)
    parser.add_argument("--record-nvml", type=Path, help="default OUT/nvml-recorded.json")
    parser.add_argument("--dry-run", action="store_true", help="check and print the plan")
    args = parser.parse_args()
    problems = preflight(args)
    if args.dry_run:
        from reflex_localize.collectors import nvml_recorded, training_hook  # noqa: F401

        print(f"plan: agent -> {args.out / 'real.lp'}; train {args.run_s:.0f} s on GPU "
              f"{args.gpu}; slow it ({args.fault}) at {args.fault_s:.0f} s; replay")  # fmt: skip
        print("missing here: " + ("; ".join(problems) if problems else "nothing"))
        return 0
    if args.fault_s <= args.overhead_s:
        problems.append("--fault-s must come after the --overhead-s minute")
    if problems:
        print("cannot run: " + "; ".join(problems), file=sys.stderr)
        return 2
    return run(args)


def run(args: argparse.Namespace) -> int:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    gpus = record_nvml(args.record_nvml or out / "nvml-recorded.json")
    env = {**os.environ, "REFLEX_HOOK_SOCKET": str(out / "hook.sock"), "PYTHONUNBUFFERED": "1"}
    os.environ["REFLEX_HOOK_SOCKET"] = env["REFLEX_HOOK_SOCKET"]  # the hook, in this process
    with (out / "real.lp").open("w") as capture, (out / "collect.err").open("w") as errors:
        agent = subprocess.Popen([sys.executable, "-m", "reflex_localize", "collect", "--stdout"],
                                 stdout=capture, stderr=errors, env=env)  # fmt: skip
        time.sleep(5)
        slowdown = Slowdown(args.gpu, args.lock_mhz, args.fault)
        try:
            result = train(args, slowdown)
        finally:
            slowdown.undo()
            time.sleep(3)  # the agent's last cycles after the loop
            agent.send_signal(signal.SIGTERM)
            agent.wait(timeout=30)
    steps, runs = read_capture(out / "real.lp")
    events = replay(out)
    before, after = result.step_s_before, result.step_s_after
    with_hook, without = result.with_hook_s, result.without_hook_s
    summary = {
        "fault": result.fault,
        "steps": result.steps,
        "step_s_before": statistics.median(before) if before else None,
        "step_s_after": statistics.median(after) if after else None,
        "verdict": verdict(events, result.fault_ns, args.gpu),
        "hook_accuracy": accuracy(steps, result.synchronized),
        "hook_overhead": (statistics.median(with_hook) / statistics.median(without) - 1)
        if with_hook and without else None,
        "gpu_collector": collector_cost(runs, gpus),
        "train": asdict(result) | {"synchronized": len(result.synchronized)},
    }  # fmt: skip
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    return report(summary)


def report(summary: dict[str, Any]) -> int:
    found = summary["verdict"]
    print(f"slowdown: {summary['fault']}; median step {summary['step_s_before']} s -> "
          f"{summary['step_s_after']} s")  # fmt: skip
    print(f"verdict: {'FOUND' if found['found'] else 'MISSED'} {found}")
    acc = summary["hook_accuracy"]
    ok_acc = acc.get("median_error", 1.0) <= ACCURACY_TOLERANCE
    print(f"hook GPU-time accuracy (CUDA events vs synchronized): {acc} "
          f"{'ok' if ok_acc else 'OVER 10%'}")  # fmt: skip
    overhead = summary["hook_overhead"]
    ok_over = overhead is not None and overhead < OVERHEAD_LIMIT
    print(f"hook overhead on the step: {overhead} {'ok' if ok_over else 'OVER 1% or unknown'}")
    cost = summary["gpu_collector"]
    share = cost.get("eight_gpus_core_share")
    ok_cost = share is not None and share < COLLECTOR_TARGET
    print(f"gpu collector CPU per cycle: {cost}; eight GPUs at 1 s: "
          f"{share if share is None else f'{share:.2%}'} of a core "
          f"{'ok' if ok_cost else 'OVER 0.5% or unknown'}")  # fmt: skip
    return 0 if found["found"] and ok_acc and ok_over and ok_cost else 1


if __name__ == "__main__":
    sys.exit(main())
