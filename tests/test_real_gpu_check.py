"""benchmarks/real_gpu_check.py without a GPU: it starts, says what is missing, and its verdict,
accuracy and cost summaries read captures and events as the flow writes them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "real_gpu_check.py"
FAULT_NS = 1_700_000_170_000_000_000


@pytest.fixture(scope="module")
def check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("real_gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_help_and_dry_run_need_no_gpu() -> None:
    shown = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert shown.returncode == 0 and "--record-nvml" in shown.stdout
    dry = subprocess.run([sys.executable, str(SCRIPT), "--dry-run"], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert dry.returncode == 0 and "plan:" in dry.stdout and "missing here:" in dry.stdout


def event(after_s: float, component: str, index: str, signal: str) -> dict[str, object]:
    evidence = [{"signal": signal, "temporal_z": 9.0, "peer_z": None, "weight": 1.0,
                 "since_ns": FAULT_NS}]  # fmt: skip
    suspect = {"node": "n1", "component": component, "index": index, "score": 5.0,
               "evidence": evidence, "role": ""}  # fmt: skip
    return {"time_ns": FAULT_NS + int(after_s * 1e9), "suspects": [suspect],
            "summary": f"{component} {index}: {signal}"}  # fmt: skip


def test_the_verdict_wants_the_gpu_and_its_clock_within_a_minute(check: ModuleType) -> None:
    assert check.verdict([event(40, "gpu", "0", "sm_clock_low")], FAULT_NS, 0)["found"]
    assert not check.verdict([event(75, "gpu", "0", "sm_clock_low")], FAULT_NS, 0)["found"]
    assert not check.verdict([event(40, "gpu", "1", "sm_clock_low")], FAULT_NS, 0)["found"]
    named = check.verdict([event(20, "gpu", "0", "power_low"), event(50, "gpu", "0",
                           "sm_clock_low")], FAULT_NS, 0)  # fmt: skip
    assert named["found"] and named["after_s"] == 50
    assert not check.verdict([], FAULT_NS, 0)["found"]


def test_accuracy_and_collector_cost(check: ModuleType, tmp_path: Path) -> None:
    capture = tmp_path / "real.lp"
    capture.write_text(
        "train_step,cluster=c,job=real-gpu-check,node=n,rank=0 step=25i,step_time_seconds=0.2,"
        'compute_seconds=0.168,section_timer="cuda_events" 1700000000000000000\n'
        "reflex_collector,cluster=c,collector=gpu,node=n duration_seconds=0.004,"
        'cpu_seconds=0.0005,success=true,points=1i,errors=0i,version="x" 1700000000000000000\n'
    )
    steps, runs = check.read_capture(capture)
    result = check.accuracy(steps, {25: 0.170})
    assert result["timers"] == ["cuda_events"] and result["median_error"] < 0.02
    cost = check.collector_cost(runs, gpus=1)
    assert cost["eight_gpus_core_share"] == pytest.approx(0.004)
