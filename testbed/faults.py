"""Where and when the injected faults and the benign conditions happen."""

from __future__ import annotations

import random

from testbed import sources
from testbed.model import Benign, Fault, Fleet, Job, Segment

NCCL_TIMEOUT_S = 600.0  # PyTorch's default ProcessGroupNCCL timeout: a hang lasts this long
RESTART_S = 150.0  # scheduler requeue + container start + checkpoint load
CRASH_KINDS = ("xid79", "hbm_uncorrectable")
SOURCES = {
    "gpu_fail_slow": f"{sources.FALCON}; {sources.MEGASCALE}",
    "thermal_throttle": f"{sources.LLAMA3}; {sources.FALCON}",
    "xid79": f"{sources.NVIDIA_XID}; {sources.LLAMA3}",
    "hbm_uncorrectable": f"{sources.NVIDIA_XID}; {sources.LLAMA3}",
    "ib_link_flap": f"{sources.MEGASCALE}; {sources.OFA_COUNTERS}",
    "ib_degraded_speed": f"{sources.OFA_COUNTERS}; {sources.LLAMA3}",
    "pcie_downtrain": sources.PCIE_DOWNTRAIN,
    "host_cpu_contention": sources.FALCON,
    "host_memory_pressure": sources.FALCON,
}


def _active(job: Job, t: float) -> Segment | None:
    for seg in job.segments:
        if seg.start_s <= t < seg.end_s and (seg.hang_at_s is None or t < seg.hang_at_s):
            return seg
    return None


def _busy_nodes(fleet: Fleet, t: float) -> list[int]:
    out = []
    for job in fleet.jobs:
        seg = _active(job, t)
        if seg is not None:
            out += seg.nodes
    return out


def _crash(fleet: Fleet, job: Job, node: int, t: float, hang: bool, rng: random.Random) -> None:
    """Ends the job's segment at ``t`` (a hang until the NCCL timeout, or a crash) and restarts
    it onto a spare that was idle for hours, from its last checkpoint."""
    seg = _active(job, t)
    assert seg is not None and node in seg.nodes
    seg.hang_at_s = t
    seg.crash_node = node
    seg.end_s = t + (NCCL_TIMEOUT_S if hang else rng.uniform(15.0, 40.0))
    restart = seg.end_s + RESTART_S + rng.uniform(0, 60)
    if restart >= fleet.duration_s - 300 or not fleet.spares:
        return
    spare = fleet.spares.pop(0)
    nodes = [spare if n == node else n for n in seg.nodes]
    steps_done = int((t - seg.start_s) / job.step_s) + seg.first_step
    last_ckpt = steps_done // job.ckpt_every * job.ckpt_every
    job.segments.append(Segment(restart, fleet.duration_s, nodes, max(1, last_ckpt + 1)))
    fleet.benign.append(Benign(
        "spare_rejoins_job", restart, restart + 900.0, [spare],
        f"{fleet.nodes[spare].name} idle for hours (cool, low clocks) joins {job.name}",
        "elastic restart onto a hot spare (MegaScale, Llama 3 automated recovery)"))  # fmt: skip
    fleet.benign.append(
        Benign(
            "job_restart_warmup",
            restart,
            restart + 300.0,
            list(nodes),
            f"{job.name} restarts from step {last_ckpt}: checkpoint load and slow first steps",
        )
    )


def plan_faults(fleet: Fleet, kinds: tuple[str, ...], count: int, rng: random.Random) -> None:
    duration = fleet.duration_s
    used: set[int] = set()
    plan: list[str] = []
    if fleet.name in ("hgx_ndr", "aisle_hdr"):
        plan.append("xid79")
    plan += rng.sample(list(kinds), min(count, len(kinds)))
    first_step = fleet.name == "site_roce"
    slots = sorted(rng.uniform(0.15, 0.8) * duration for _ in plan)
    # spread the slots at least 12 minutes apart where the run allows
    for i in range(1, len(slots)):
        slots[i] = max(slots[i], slots[i - 1] + min(720.0, duration / (2 * len(plan))))
    rng.shuffle(slots)
    for i, kind in enumerate(plan):
        start = min(slots[i], duration * 0.85)
        if first_step and i == len(plan) - 1 and kind != "xid79":
            early = [k for k in ("gpu_fail_slow", "ib_degraded_speed", "pcie_downtrain")
                     if k not in plan[:i]] or ["gpu_fail_slow"]  # fmt: skip
            kind = rng.choice(early)
            seg0 = fleet.jobs[0].segments[0]
            start = seg0.start_s
        candidates = [n for n in _busy_nodes(fleet, start) if n not in used]
        if kind == "xid79" or kind == "hbm_uncorrectable":
            first = _active(fleet.jobs[0], start)
            candidates = [n for n in candidates if first is not None and n in first.nodes]
        if not candidates:
            continue
        node = rng.choice(candidates)
        used.add(node)
        fleet.faults.append(_fault(fleet, kind, node, start, rng, first_step and start < 120))
        if kind in CRASH_KINDS:
            job = next(j for j in fleet.jobs if (s := _active(j, start)) and node in s.nodes)
            _crash(fleet, job, node, start, kind == "xid79", rng)
    fleet.faults.sort(key=lambda f: f.start_s)


def _fault(fleet: Fleet, kind: str, node: int, start: float, rng: random.Random,
           from_start: bool) -> Fault:  # fmt: skip
    duration = fleet.duration_s
    n = fleet.nodes[node]
    gpu = rng.randrange(8)
    rail_port = n.ports[n.gpu_rail[gpu]]
    port_index = f"{rail_port.hca}/{rail_port.port}"
    end = duration
    if kind == "gpu_fail_slow":
        return Fault(kind, node, "gpu", str(gpu), start, end, rng.uniform(0.10, 0.30),
                     from_start, SOURCES[kind])  # fmt: skip
    if kind == "thermal_throttle":
        end = min(duration, start + rng.uniform(720, 1500))
        return Fault(kind, node, "gpu", str(gpu), start, end, rng.uniform(0.65, 0.8),
                     from_start, SOURCES[kind])  # fmt: skip
    if kind in CRASH_KINDS:
        return Fault(kind, node, "gpu", str(gpu), start, end, 1.0, from_start, SOURCES[kind])
    if kind == "pcie_downtrain":
        return Fault(kind, node, "gpu", str(gpu), start, end, rng.uniform(1.12, 1.25),
                     from_start, SOURCES[kind])  # fmt: skip
    if kind == "ib_degraded_speed":
        return Fault(kind, node, "nic", port_index, start, end, rng.uniform(1.35, 1.6),
                     from_start, SOURCES[kind])  # fmt: skip
    if kind == "ib_link_flap":
        end = min(duration, start + rng.uniform(600, 1200))
        fault = Fault(kind, node, "nic", port_index, start, end, 1.15, from_start, SOURCES[kind])
        t = start
        while t < end:
            down = rng.uniform(4.0, 15.0)
            fault.episodes.append((t, t + down))
            t += down + rng.uniform(40.0, 150.0)
        return fault
    if kind in ("host_cpu_contention", "host_memory_pressure"):
        end = min(duration, start + rng.uniform(900, 1800))
        return Fault(kind, node, "host", "-", start, end, 1.0, from_start, SOURCES[kind])
    raise ValueError(kind)


def plan_benign(fleet: Fleet, rng: random.Random) -> None:
    duration = fleet.duration_s
    job_nodes = sorted({n for job in fleet.jobs for seg in job.segments for n in seg.nodes})
    for job in fleet.jobs:
        nodes = sorted({n for seg in job.segments for n in seg.nodes})
        start = job.segments[0].start_s
        fleet.benign.append(
            Benign(
                "job_start_warmup",
                start,
                start + 300.0,
                nodes,
                f"{job.name} launches: idle GPUs heat up, slow first steps",
            )
        )
        if job.moe:
            fleet.benign.append(Benign(
                "moe_hot_expert_rotation", start, duration, nodes,
                f"{job.name}: the hottest experts move to other ranks every step",
                sources.MOE_IMBALANCE))  # fmt: skip
        if job.pp > 1:
            fleet.benign.append(Benign(
                "pipeline_stage_imbalance", start, duration, nodes,
                f"{job.name}: first and last stages {job.stage_skew:.0%} heavier (embedding, loss)",
                sources.BYTEDANCE_STRAGGLERS))  # fmt: skip
    t = rng.uniform(0.3, 0.6) * duration
    fleet.benign.append(Benign(
        "shared_fs_slow_checkpoint", t, t + 1500.0, job_nodes,
        "the parallel filesystem serves every node's checkpoint 3-5x slower",
        sources.CHECKPOINT_FS, rng.uniform(3.0, 5.0)))  # fmt: skip
    for _ in range(2):
        t = rng.uniform(0.1, 0.9) * duration
        affected = sorted(rng.sample(job_nodes, int(len(job_nodes) * rng.uniform(0.55, 0.85))))
        fleet.benign.append(Benign(
            "fabric_congestion", t, t + rng.uniform(480, 900), affected,
            "another tenant's traffic through the spine: credit waits / ECN on most nodes",
            f"{sources.FALCON}; {sources.OFA_COUNTERS}", rng.uniform(1.2, 1.5)))  # fmt: skip
    if fleet.name == "hgx_ndr":
        rack = fleet.nodes[rng.choice(job_nodes)].rack
        t = rng.uniform(0.2, 0.8) * duration
        fleet.benign.append(
            Benign(
                "mgmt_switch_reboot",
                t,
                t + 35.0,
                [n.index for n in fleet.nodes if n.rack == rack],
                f"the management switch of {rack} reboots: eno1 down 20-35 s on its nodes",
            )
        )
    if fleet.name == "aisle_hdr":
        victim = rng.choice(job_nodes)
        t = rng.uniform(0.2, 0.8) * duration
        fleet.benign.append(
            Benign(
                "oom_kill_sidecar",
                t,
                t + 5.0,
                [victim],
                "the kernel OOM-kills a log shipper, not the training",
            )
        )
    for node in fleet.nodes:
        if node.warm_gpu is not None:
            fleet.benign.append(
                Benign(
                    "warm_gpu",
                    0.0,
                    duration,
                    [node.index],
                    f"GPU {node.warm_gpu} always runs ~3 C warmer",
                )
            )
        if node.noisy_port is not None:
            port = node.ports[node.noisy_port]
            fleet.benign.append(
                Benign(
                    "noisy_port",
                    0.0,
                    duration,
                    [node.index],
                    f"{port.hca}/{port.port}: steady low symbol errors",
                )
            )
        if node.saturated_port is not None:
            port = node.ports[node.saturated_port]
            fleet.benign.append(
                Benign(
                    "saturated_counter",
                    0.0,
                    duration,
                    [node.index],
                    f"{port.hca}/{port.port} symbol_error stuck at 65535",
                )
            )
    spares_idle = [n for n in fleet.spares]
    if spares_idle:
        fleet.benign.append(
            Benign(
                "idle_spares",
                0.0,
                duration,
                spares_idle,
                "hot spares idle the whole run: cool, low clocks, PCIe Gen1",
            )
        )
    fleet.benign.append(
        Benign("diurnal_temperature", 0.0, duration, [n.index for n in fleet.nodes], sources.LLAMA3)
    )
