"""Benign-only runs really contain the benign anomalies and quirks, and are labelled no fault."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from reflex_localize.schemas.codec import decode
from reflex_localize.schemas.frame import Frame
from reflex_localize.shell.simulate import command
from reflex_localize.simulator import Simulation, load_scenario
from reflex_localize.simulator.tables import concat_frames


@cache
def busy() -> tuple[Simulation, dict[str, Frame]]:
    sim = Simulation(load_scenario("benign_busy"), seed=4)
    groups: dict[str, list[Frame]] = {}
    for chunk in sim.chunks(seconds=60.0):
        for frame in chunk:
            groups.setdefault(frame.measurement, []).append(frame)
    return sim, {name: concat_frames(frames) for name, frames in groups.items()}


def growth_by_entity(frame: Frame, field: str, *tags: str) -> np.ndarray:
    key = np.array(["/".join(parts) for parts in zip(*(frame.tags[t] for t in tags), strict=True)])
    return np.array([np.ptp(frame.fields[field][key == k]) for k in np.unique(key)])


def test_labelled_no_fault() -> None:
    sim, _ = busy()
    [label] = sim.truth
    assert (label.fault_type, label.fault_class, label.expect) == (
        "none", "none", "no_hardware_fault"
    )  # fmt: skip


def test_gpu_anomalies_are_there_and_short() -> None:
    _, t = busy()
    gpu = t["gpu"]
    throttled = gpu.fields["clocks_event_reasons"] != 0
    assert 0 < throttled.mean() < 0.02  # transient throttles: present, rare
    ecc = growth_by_entity(gpu, "ecc_corrected_volatile", "node", "gpu")
    replays = growth_by_entity(gpu, "pcie_replay_errors", "node", "gpu")
    assert (ecc >= 4).sum() >= 3 and (replays >= 1).sum() >= 3
    assert (gpu.fields["ecc_uncorrected_volatile"] == 0).all()


def test_network_and_host_anomalies_are_there() -> None:
    _, t = busy()
    symbols = growth_by_entity(t["ib_port"], "symbol_error", "node", "hca")
    assert (symbols >= 3).sum() >= 3
    assert (t["nic"].fields["rx_errors"] > 0).any()
    psi = t["host"].fields["psi_cpu_some_avg10_ratio"]
    assert (psi > 0.12).mean() > 0.001
    wait = t["ib_port"].fields["port_xmit_wait"]
    assert wait.max() > 10 * np.median(np.diff(np.sort(wait)))  # congestion episodes


def test_checkpoints_pause_every_rank_without_a_fault() -> None:
    _, t = busy()
    steps = t["train_step"]
    paused = steps.fields["step_time_seconds"] > 10
    assert paused.any()
    # A pause is neither compute nor communication.
    assert (steps.fields["compute_seconds"][paused] < 2).all()
    io = t["host"].fields["psi_io_some_avg10_ratio"]
    assert (io > 0.2).any()


def test_benign_background_does_not_slow_the_job() -> None:
    sim, t = busy()
    steps = t["train_step"]
    seconds = (steps.time_ns - sim.start_ns) / 1e9
    train = steps.tags["job"] == "train"
    first = np.median(steps.fields["step_time_seconds"][train & (seconds < 300)])
    second = np.median(steps.fields["step_time_seconds"][train & (seconds >= 300)])
    assert abs(second / first - 1) < 0.05


def test_quirks_are_persistent_offsets() -> None:
    sim, t = busy()
    gpu = t["gpu"]
    busy_rows = gpu.fields["utilization_gpu_ratio"] > 0.5
    for quirk in sim.quirks:
        on_node = gpu.tags["node"] == quirk.node
        if quirk.kind == "hot_node":
            hot = gpu.fields["temperature_celsius"][busy_rows & on_node].mean()
            rest = gpu.fields["temperature_celsius"][busy_rows & ~on_node].mean()
            assert hot > rest + 1.5
        if quirk.kind == "slow_clock_gpu":
            mine = busy_rows & on_node & (gpu.tags["gpu"] == quirk.index)
            others = busy_rows & ~(on_node & (gpu.tags["gpu"] == quirk.index))
            ratio = (
                gpu.fields["sm_clock_mhz"][mine].mean() / gpu.fields["sm_clock_mhz"][others].mean()
            )
            assert 0.95 < ratio < 0.99
        if quirk.kind == "noisy_port":
            ports = t["ib_port"]
            hca = quirk.index.split("/")[0]
            mine = (ports.tags["node"] == quirk.node) & (ports.tags["hca"] == hca)
            assert np.ptp(ports.fields["symbol_error"][mine]) >= 10


def test_cli_writes_line_protocol_and_truth(tmp_path: Path) -> None:
    out, truth = tmp_path / "run.lp", tmp_path / "truth.json"
    arguments = ["fault_xid79", "--seed", "3", "--scale", "32"]
    result = CliRunner().invoke(command, [*arguments, "--out", str(out), "--truth", str(truth)])
    assert result.exit_code == 0, result.output
    lines = out.read_text().splitlines()
    assert len(lines) > 50_000
    for line in lines[:: len(lines) // 500]:
        decode(line)
    assert '"fault_type": "xid79"' in truth.read_text()
    listing = CliRunner().invoke(command, ["--list"])
    assert "demo" in listing.output and "pfc_storm" in listing.output
