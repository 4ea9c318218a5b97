"""Benign background and persistent quirks: anomalies that are not faults.

Real fleets are never clean: throttles come and go, ECC corrects a burst of bits, a PCIe
replay or a symbol error happens, a host gets busy for a few seconds, the fabric congests.
A detector that fires on these alone is useless, so they are on by default. Quirks are
permanent per-entity offsets (a hot node, a slow-clocked GPU, a noisy port) that only a
longitudinal baseline can tell from a fault.

>>> import numpy as np
>>> from reflex_localize.simulator.scenario import load_scenario
>>> from reflex_localize.simulator.cluster import build_cluster
>>> scenario = load_scenario("demo")
>>> episodes = background_episodes(scenario, build_cluster(scenario), np.random.default_rng(1))
>>> {"clock", "ecc_corrected", "symbol_error"} <= {e.effect for e in episodes}
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reflex_localize.simulator.cluster import ClusterSpec
from reflex_localize.simulator.effects import Episode
from reflex_localize.simulator.events import EventRecord
from reflex_localize.simulator.faults import SW_POWER_CAP, SW_THERMAL, pci_bus_id
from reflex_localize.simulator.jobs import TRAIN_UTIL
from reflex_localize.simulator.scenario import BenignEpisode, Scenario


@dataclass(frozen=True)
class Quirk:
    kind: str  # "hot_node", "slow_clock_gpu", "noisy_port"
    node: str
    index: str  # GPU index or HCA port, "" for a whole node


def _draws(
    rng: np.random.Generator, per_hour: float, entities: int, duration_s: float, lasting: tuple
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Poisson episode starts over ``entities``: (entity, start_s, end_s) arrays."""
    count = rng.poisson(per_hour * entities * duration_s / 3600.0)
    entity = rng.integers(0, max(entities, 1), count)
    start = np.floor(rng.uniform(0, duration_s, count))
    return entity, start, start + rng.integers(lasting[0], lasting[1] + 1, count)


def background_episodes(
    scenario: Scenario, cluster: ClusterSpec, rng: np.random.Generator
) -> list[Episode]:
    rates, duration = scenario.background, scenario.duration_s
    gpus, ports, nodes = cluster.gpu_count, cluster.gpu_count, len(cluster.nodes)
    out: list[Episode] = []

    def add(level: str, draws: tuple, **effects: float) -> None:
        for entity, start, end in zip(*draws, strict=True):
            target = np.array([entity])
            for effect, value in effects.items():
                out.append(Episode(level, target, float(start), float(end), effect, value))

    add("gpu", _draws(rng, rates.throttle_per_gpu_hour, gpus, duration, (2, 10)),
        throttle=SW_THERMAL, clock=0.88, compute=1.08)  # fmt: skip
    add("gpu", _draws(rng, rates.ecc_burst_per_gpu_hour, gpus, duration, (2, 6)),
        ecc_corrected=4.0)  # fmt: skip
    add("gpu", _draws(rng, rates.pcie_replay_per_gpu_hour, gpus, duration, (1, 2)),
        pcie_replay=2.0)  # fmt: skip
    blips = _draws(rng, rates.nic_blip_per_port_hour, ports, duration, (1, 3))
    add("port", blips, symbol_error=6.0, rcv_error=0.7)
    add("nic", _draws(rng, rates.nic_blip_per_port_hour, nodes, duration, (1, 3)), rx_errors=3.0)
    add("host", _draws(rng, rates.cpu_contention_per_node_hour, nodes, duration, (5, 30)),
        psi_cpu=0.15, cpu_busy=0.2, load=30.0, compute=1.02)  # fmt: skip
    for job in cluster.jobs:
        span = job.end_s - job.start_s
        _, starts, ends = _draws(rng, rates.congestion_per_job_hour, 1, span, (10, 60))
        ports_of_job = np.unique(job.rank_gpu)
        for start, end in zip(starts + job.start_s, ends + job.start_s, strict=True):
            out.append(Episode("port", ports_of_job, start, end, "xmit_wait", 8e6))
            out.append(Episode("port", ports_of_job, start, end, "comm", 1.15))
    return out


def background_events(
    scenario: Scenario, cluster: ClusterSpec, rng: np.random.Generator
) -> list[EventRecord]:
    """Corrected machine checks: the kernel logs them, and they mean nothing for a job."""
    nodes, starts, _ = _draws(
        rng, scenario.background.mce_per_node_hour, len(cluster.nodes), scenario.duration_s, (0, 0)
    )
    offsets = rng.uniform(0, 1, len(starts))
    return [
        EventRecord(
            scenario.start_ns + int((start + offset) * 1e9),
            cluster.nodes[node].name,
            "kmsg",
            "mce",
            {
                "code": int(bank),
                "message": f"mce: [Hardware Error]: Machine check events logged "
                f"(corrected, bank {bank})",
            },
        )
        for node, start, offset, bank in zip(
            nodes, starts, offsets, rng.integers(0, 28, len(starts)), strict=True
        )
    ]


def quirk_episodes(
    scenario: Scenario, cluster: ClusterSpec, rng: np.random.Generator
) -> tuple[list[Episode], list[Quirk]]:
    gpus_per_node, duration = cluster.gpus_per_node, scenario.duration_s
    nodes = len(cluster.nodes)
    quirks, episodes = [], []
    # ``spare`` nodes carry no quirk; without any, the draws are the ones they always were.
    hot_from, gpus_from = _unspared(scenario, cluster)
    for node in rng.choice(
        hot_from, min(scenario.quirks.hot_nodes, _size(hot_from)), replace=False
    ):
        gpus = np.arange(node * gpus_per_node, (node + 1) * gpus_per_node)
        offset = float(rng.uniform(3, 5)) * scenario.quirks.strength
        episodes.append(Episode("gpu", gpus, 0, duration, "temp", offset))
        quirks.append(Quirk("hot_node", cluster.nodes[node].name, ""))
    count = min(scenario.quirks.slow_clock_gpus, _size(gpus_from))
    for gpu in rng.choice(gpus_from, count, replace=False):
        # A binned-low part: 2-3 % less clock, and its rank a little slower, for ever.
        clock = 1 - (1 - float(rng.uniform(0.97, 0.98))) * scenario.quirks.strength
        episodes.append(Episode("gpu", np.array([gpu]), 0, duration, "clock", clock))
        episodes.append(Episode("gpu", np.array([gpu]), 0, duration, "compute", 1 / clock))
        node = cluster.nodes[gpu // gpus_per_node].name
        quirks.append(Quirk("slow_clock_gpu", node, str(gpu % gpus_per_node)))
    ports = min(scenario.quirks.noisy_ports, nodes, _size(gpus_from))
    for port in rng.choice(gpus_from, ports, replace=False):
        rate = 0.05 * scenario.quirks.strength
        episodes.append(Episode("port", np.array([port]), 0, duration, "symbol_error", rate))
        node = cluster.nodes[port // gpus_per_node]
        quirks.append(Quirk("noisy_port", node.name, f"{node.hcas[port % gpus_per_node]}/1"))
    return episodes, quirks


def _unspared(scenario: Scenario, cluster: ClusterSpec) -> tuple[int | list[int], int | list[int]]:
    """The nodes and GPUs (ports) the counted quirks are drawn from: every one, as a count, when
    no node is ``spare``; otherwise the others, as index lists."""
    spare = set(scenario.quirks.spare)
    if not spare:
        return len(cluster.nodes), cluster.gpu_count
    nodes = [n for n, node in enumerate(cluster.nodes) if node.name not in spare]
    per_node = cluster.gpus_per_node
    return nodes, [n * per_node + g for n in nodes for g in range(per_node)]


def _size(population: int | list[int]) -> int:
    return population if isinstance(population, int) else len(population)


# The persistent quirks of a quirky fleet ([quirks] share > 0), each healthy for ever:
FLEET_QUIRKS = ("hot_node", "slow_gpu", "noisy_nic", "ecc_bursts_gpu")
ECC_QUIRK_BURSTS_PER_HOUR = 12.0  # a GPU that corrects a burst of bits every few minutes


def fleet_quirk_episodes(
    scenario: Scenario, cluster: ClusterSpec, rng: np.random.Generator
) -> tuple[list[Episode], list[Quirk]]:
    """Quirks on ``share`` of the nodes (never the ``spare`` ones), ``kinds_per_node`` each;
    nothing, and no draw from ``rng``, when the share is 0."""
    quirks = scenario.quirks
    if quirks.share <= 0:
        return [], []
    candidates = [n for n, node in enumerate(cluster.nodes) if node.name not in quirks.spare]
    count = min(len(candidates), round(quirks.share * len(cluster.nodes)))
    kinds = min(quirks.kinds_per_node, len(FLEET_QUIRKS))
    episodes: list[Episode] = []
    found: list[Quirk] = []
    for node in sorted(int(n) for n in rng.choice(candidates, count, replace=False)):
        for kind in sorted(rng.choice(FLEET_QUIRKS, kinds, replace=False)):
            gpu = int(rng.integers(0, cluster.gpus_per_node))
            episodes += _fleet_quirk(str(kind), node, gpu, scenario, cluster, rng)
            index = "" if kind == "hot_node" else str(gpu)
            if kind == "noisy_nic":
                index = f"{cluster.nodes[node].hcas[gpu]}/1"
            found.append(Quirk(str(kind), cluster.nodes[node].name, index))
    return episodes, found


def _fleet_quirk(
    kind: str, node: int, gpu: int, scenario: Scenario, cluster: ClusterSpec,
    rng: np.random.Generator,
) -> list[Episode]:  # fmt: skip
    strength, duration = scenario.quirks.strength, scenario.duration_s
    per_node = cluster.gpus_per_node
    one = np.array([node * per_node + gpu])
    if kind == "hot_node":
        gpus = np.arange(node * per_node, (node + 1) * per_node)
        return [Episode("gpu", gpus, 0, duration, "temp", float(rng.uniform(3, 6)) * strength)]
    if kind == "slow_gpu":
        # 1-3 % slower for ever: a binned-low part, not a failing one.
        clock = 1 - float(rng.uniform(0.01, 0.03)) * strength
        return [Episode("gpu", one, 0, duration, "clock", clock),
                Episode("gpu", one, 0, duration, "compute", 1 / clock)]  # fmt: skip
    if kind == "noisy_nic":
        return [Episode("port", one, 0, duration, "symbol_error", 0.1 * strength),
                Episode("port", one, 0, duration, "rcv_error", 0.02 * strength)]  # fmt: skip
    starts, ends = _draws(rng, ECC_QUIRK_BURSTS_PER_HOUR * strength, 1, duration, (2, 6))[1:]
    return [Episode("gpu", one, float(s), float(e), "ecc_corrected", 4.0)
            for s, e in zip(starts, ends, strict=True)]  # fmt: skip


def scheduled_benign(
    scenario: Scenario, cluster: ClusterSpec
) -> tuple[list[Episode], list[EventRecord]]:
    """The scenario's ``[[benign]]`` episodes: job-wide slow phases and a GPU's harmless
    repeats, placed where the file says (no randomness, no label)."""
    episodes: list[Episode] = []
    events: list[EventRecord] = []
    jobs = {job.name: job for job in cluster.jobs}
    for item in scenario.benign:
        end = item.start_s + item.duration_s
        if item.kind == "congestion":
            ports = np.unique(jobs[str(item.job)].rank_gpu)
            episodes.append(Episode("port", ports, item.start_s, end, "xmit_wait", 4e7))
            episodes.append(Episode("port", ports, item.start_s, end, "comm", item.factor))
        elif item.kind == "storage_slow":
            hosts = np.unique(jobs[str(item.job)].rank_node)
            for effect, value in (("psi_io", 0.3), ("iowait", 0.15), ("compute", item.factor)):
                episodes.append(Episode("host", hosts, item.start_s, end, effect, value))
        elif item.kind == "workload_heavier":
            episodes += heavier_workload(item, jobs[str(item.job)].rank_gpu)
        else:
            node = cluster.node_index(str(item.node))
            gpu = np.array([node * cluster.gpus_per_node + item.gpu])
            for n in range(item.count):
                at = item.start_s + n * item.every_s
                if item.kind == "ecc_bursts":
                    episodes.append(
                        Episode("gpu", gpu, at, at + item.duration_s, "ecc_corrected", 4.0)
                    )
                elif item.kind == "app_xid":
                    events.append(_app_xid(scenario, str(item.node), item.gpu, item.code, at))
                else:
                    episodes += _small_anomaly(item, node, gpu, at)
    return episodes, events


# A heavier workload (``workload_heavier``). The power model is gpu_telemetry's: a GPU draws
# 0.1 of its limit idle and 0.82 at full utilization, times the ``power`` effect, clipped at the
# limit, and runs 45 C warmer at the limit than idle.
IDLE_POWER_RATIO, FULL_POWER_RATIO, DEGREES_AT_LIMIT = 0.1, 0.82, 45.0
# GPU Boost picks the clock from the power and temperature headroom it has now (NVIDIA, GPU
# Boost: https://www.nvidia.com/en-gb/geforce/technologies/gpu-boost/technology/; "anything able
# to nudge [the GPU's] temperature up or down alters the chip's clock rate", Tom's Hardware on
# GPU Boost 2.0, https://www.tomshardware.com/reviews/geforce-gtx-titan-gk110-review,3438-4.html).
# 0.2 % a degree, at most 2 %, is chosen: a 15 MHz bin of a 1980 MHz H100 every ~4 C.
BOOST_LOSS_PER_DEGREE, BOOST_LOSS_MAX = 0.002, 0.02


def heavier_workload(item: BenignEpisode, gpus: np.ndarray) -> list[Episode]:
    """A larger micro-batch or sequence length from ``start_s``: the job's own work, no fault.

    Each rank computes ``factor`` slower (its compute time as the hook sees it, the clock's
    share included); the gradients, and so the communication, keep their size. Bigger kernels keep
    more of the chip busy, so the GPUs draw ``power`` times their training power: an 8-GPU H100
    node drew ~1 kW more on average when ResNet's batch grew from 512 to 4096 (Latif et al.,
    arXiv:2412.08602). The temperature follows the power (gpu_telemetry), GPU Boost settles a
    little lower there, and a GPU that would draw more than its limit is held at it: the
    software power cap reason ("the clocks have been optimized to ensure not to exceed currently
    set power limits", NVML clocks event reasons,
    https://docs.nvidia.com/deploy/nvml-api/api/group__nvmlClocksEventReasons.html), which
    NVIDIA's own health monitor treats as noise, not a fault (NVIDIA/NVSentinel issue #1666),
    with the clock a little lower still (dynamic power ~ f V^2, V ~ f near the top: ~f^3).

    >>> episode = BenignEpisode("workload_heavier", 300.0, 600.0, job="a", factor=1.2, power=1.4)
    >>> effects = {e.effect: e.value for e in heavier_workload(episode, np.arange(8))}
    >>> effects["compute"], effects["power"], round(effects["clock"], 3), effects["throttle"]
    (1.2, 1.4, 0.98, 4)
    """
    busy = IDLE_POWER_RATIO + (FULL_POWER_RATIO - IDLE_POWER_RATIO) * TRAIN_UTIL
    wanted = IDLE_POWER_RATIO + (busy - IDLE_POWER_RATIO) * item.power  # of the limit
    warmer = DEGREES_AT_LIMIT * (min(wanted, 1.0) - busy)
    shed = max(wanted - 1.0, 0.0) / 3
    clock = 1 - min(BOOST_LOSS_MAX, BOOST_LOSS_PER_DEGREE * warmer + shed)
    start, end = item.start_s, item.start_s + item.duration_s
    effects: dict[str, float] = {"compute": item.factor, "power": item.power, "clock": clock}
    if wanted >= 1.0:
        effects["throttle"] = SW_POWER_CAP
    return [Episode("gpu", gpus, start, end, name, value) for name, value in effects.items()]


# The single anomalies of a [[benign]] entry, the same pieces (and sizes) as compound_benign's.
SMALL_ANOMALIES = {
    "throttles": ("gpu", {"throttle": SW_THERMAL, "clock": 0.93, "compute": 1.07}),
    "pcie_replays": ("gpu", {"pcie_replay": 0.25}),
    "symbol_errors": ("port", {"symbol_error": 1.5}),
    "cpu_pressure": ("host", {"psi_cpu": 0.12, "cpu_busy": 0.1}),
}


def _small_anomaly(item: BenignEpisode, node: int, gpu: np.ndarray, at: float) -> list[Episode]:
    level, effects = SMALL_ANOMALIES[item.kind]
    if item.kind == "cpu_pressure":
        effects = {**effects, "compute": item.factor}
    # A GPU's port is the one on its rail: the same global index (one HCA per GPU).
    entities = np.array([node]) if level == "host" else gpu
    end = at + item.duration_s
    return [Episode(level, entities, at, end, name, value) for name, value in effects.items()]


def _app_xid(scenario: Scenario, node: str, gpu: int, code: int, at_s: float) -> EventRecord:
    # As the NVML event collector reports any XID (faults._xid); 13 and 31 read like this in
    # the driver's log.
    message = {13: "Graphics Engine Exception", 31: "MMU Fault", 43: "GPU stopped processing",
               45: "Preemptive cleanup, due to previous errors"}[code]  # fmt: skip
    return EventRecord(
        scenario.start_ns + int(at_s * 1e9),
        node,
        "nvml",
        "xid",
        {"code": code, "gpu": gpu, "device": pci_bus_id(gpu), "message": f"Xid {code}, {message}"},
    )
