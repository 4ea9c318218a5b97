"""Scenario files: a cluster, its jobs, its benign background and its faults, in TOML.

Scenarios live in ``scenarios/`` beside this file and are loaded by name, or from any path.
``scale_scenario`` resizes one to a GPU count (``reflex simulate --scale``) while keeping its
faults attached to the same jobs. Evaluation families (``scenarios/families/<family>/``, see
the README there) are scenario files shaped like real jobs, kept out of the library.

>>> scenario = load_scenario("demo")
>>> scenario.nodes, scenario.gpus_per_node, [job.name for job in scenario.jobs]
(32, 8, ['llm-a', 'llm-b'])
>>> scale_scenario(scenario, 1024).nodes
128
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reflex_localize.influx.config import ConfigError, section_as
from reflex_localize.schemas.hardware_profiles import load_profiles

LIBRARY = Path(__file__).parent / "scenarios"
FAMILIES = LIBRARY / "families"
DEFAULT_START_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z: fixed, so runs repeat


@dataclass(frozen=True)
class BackgroundRates:
    """Benign anomalies, each a Poisson process: episodes per entity-hour (0 turns one off)."""

    throttle_per_gpu_hour: float = 0.4
    ecc_burst_per_gpu_hour: float = 0.3
    pcie_replay_per_gpu_hour: float = 0.5
    nic_blip_per_port_hour: float = 0.5
    cpu_contention_per_node_hour: float = 0.6
    congestion_per_job_hour: float = 3.0
    mce_per_node_hour: float = 0.5  # corrected machine checks: logged, harmless


@dataclass(frozen=True)
class Quirks:
    """Persistent per-entity oddities that are normal for that entity, never a fault."""

    hot_nodes: int = 1
    slow_clock_gpus: int = 1
    noisy_ports: int = 1
    # Scales every quirk's offset: real fleets have parts that run far off their peers for
    # years without being faulty, which is what an entity's own baseline is for.
    strength: float = 1.0
    # A quirky fleet: this share of the nodes (drawn per seed, never the ``spare`` ones) each
    # carry ``kinds_per_node`` of the persistent quirks in ``background.FLEET_QUIRKS`` (hot,
    # 1-3 % slow GPU, noisy NIC counters, corrected-ECC bursts). 0 leaves the fleet as above.
    # ``spare`` nodes get none of the counted quirks above either (hot, slow-clock, noisy).
    share: float = 0.0
    kinds_per_node: int = 2
    spare: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobConfig:
    name: str
    nodes: int
    pp: int = 1
    tp: int = 8
    start_s: float = 0.0
    end_s: float | None = None
    profile: str | None = None  # place the job on nodes of this profile only
    step_s: float = 1.5  # nominal step time of a healthy rank, compute + own communication
    comm_fraction: float = 0.25
    last_stage_factor: float = 1.06  # the last pipeline stage carries the loss head
    seq_noise: float = 0.03  # lognormal sigma of per-replica sequence-length cost
    checkpoint_every_s: float = 300.0
    checkpoint_s: float = 12.0
    nccl_timeout_s: float = 30.0
    # job_membership fields the training hook does not know and leaves out ("gpu", "profile"):
    # a hook that is not told its device index or the hardware model simply omits them.
    membership_omits: tuple[str, ...] = ()
    # The hook marks its checkpoint section: train_step carries checkpoint_seconds.
    checkpoint_marked: bool = False
    # Explicit placement by node name; a node may serve jobs whose time spans do not overlap
    # (a node that moves from one job to the next). Empty: the next free nodes, as before.
    nodes_list: tuple[str, ...] = ()


@dataclass(frozen=True)
class FaultConfig:
    """One injected fault. ``node`` is a node name, or ``job`` + ``job_node`` (index of the
    node within the job), which survives ``--scale``."""

    type: str
    onset_s: float
    node: str | None = None
    job: str | None = None
    job_node: int = 0
    gpu: int = 0
    port: int = 0
    duration_s: float | None = None
    # onset_s counts from the start of the fault's job, not of the simulation: with onset_s = 0
    # the part is bad from the job's first step (a bad node handed to the job at launch).
    from_job_start: bool = False
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BenignEpisode:
    """A scheduled episode that is not a fault and has no label (``[[benign]]``):

    * ``congestion``: every port of ``job`` waits (``xmit_wait``) and its ranks' communication
      slows by ``factor`` (a PFC/ECN episode on the shared fabric);
    * ``storage_slow``: every host of ``job`` waits on IO and computes ``factor`` slower (a slow
      shared-filesystem phase for the data loader);
    * ``app_xid``: XID ``code`` (13, 31, 43 or 45: application-class) on ``node`` GPU ``gpu``,
      ``count`` times, ``every_s`` apart;
    * ``ecc_bursts``: corrected-ECC bursts of ``duration_s`` on ``node`` GPU ``gpu``, ``count``
      times, ``every_s`` apart (errors that come and go, each burst within normal background).

    Single small anomalies on one node, each ``count`` times for ``duration_s``, ``every_s``
    apart, as the pieces of ``compound_benign`` are (a node that carries one of them is normal):

    * ``throttles``: GPU ``gpu`` throttles (software thermal), clock 0.93, its rank x1.07;
    * ``pcie_replays``: GPU ``gpu`` replays PCIe packets, 0.25 a second, at full link width;
    * ``symbol_errors``: the port of GPU ``gpu``'s rail counts 1.5 symbol errors a second;
    * ``cpu_pressure``: the host's CPU pressure (PSI 0.12) slows its ranks by ``factor``
      (at most 1.1).

    A change of the job's own work, not of its hardware:

    * ``workload_heavier``: from ``start_s`` for ``duration_s`` every rank of ``job`` computes
      ``factor`` slower (1.0-2.0: a larger micro-batch or sequence length) and its GPUs draw
      ``power`` times their training power (1.0-1.5: bigger kernels keep more of the chip
      busy), at most their limit; the temperature follows the power, GPU Boost settles 0-2 %
      lower at the higher temperature, and at the limit the clocks carry the software power
      cap reason (``background.heavier_workload``).
    """

    kind: str
    start_s: float
    duration_s: float = 60.0
    job: str | None = None
    node: str | None = None
    gpu: int = 0
    factor: float = 1.3
    code: int = 13
    count: int = 1
    every_s: float = 60.0
    power: float = 1.15


BENIGN_KINDS = {"congestion": "job", "storage_slow": "job", "app_xid": "node",
                "ecc_bursts": "node", "throttles": "node", "pcie_replays": "node",
                "symbol_errors": "node", "cpu_pressure": "node",
                "workload_heavier": "job"}  # fmt: skip
APPLICATION_XIDS = {13, 31, 43, 45}


@dataclass(frozen=True)
class EvaluationSection:
    """``[evaluation]``: this scenario is the paired control of ``control_of`` (the same job
    ``measured_job`` without the history before it), for ``reflex eval``'s moving-node table."""

    control_of: str = ""
    measured_job: str = ""


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    duration_s: float
    nodes: int
    gpus_per_node: int
    profiles: dict[str, int]  # profile name -> node count, in placement order
    roce_nodes: int  # the last roce_nodes nodes use RoCE (Ethernet) instead of InfiniBand
    jobs: tuple[JobConfig, ...]
    faults: tuple[FaultConfig, ...]
    background: BackgroundRates
    quirks: Quirks
    mixture_faults: int = 0  # > 0: draw this many faults from the published failure mix
    cluster_name: str = "sim"
    start_ns: int = DEFAULT_START_NS
    # Nodes where the node agent (gpu, host, nic collectors, kernel and NVML events) is not
    # running, ("all",) for a cluster with the training hook only; the hook's train_step,
    # job_membership and training events still come from every node.
    agent_down: tuple[str, ...] = ()
    # What the agent writes besides the defaults: gpu_info (on unless turned off), the GPU's
    # HCA rail (gpu_topology) and local disks (host_disk), both off so library frames stay.
    gpu_info: bool = True
    gpu_topology: bool = False
    host_disk: bool = False
    benign: tuple[BenignEpisode, ...] = ()
    evaluation: EvaluationSection = field(default_factory=EvaluationSection)


class ScenarioError(ValueError):
    """A scenario file is malformed; the message names the scenario and what is wrong."""


def scenario_names() -> list[str]:
    """Names of the scenarios in the library."""
    return sorted(path.stem for path in LIBRARY.glob("*.toml"))


def family_names() -> list[str]:
    """Names of the evaluation families (folders of ``scenarios/families``).

    >>> {"launch_straggler", "moving_node", "quirky_fleet"} <= set(family_names())
    True
    """
    return sorted(path.name for path in FAMILIES.iterdir() if any(path.glob("*.toml")))


def family_scenarios(family: str) -> list[Path]:
    """The scenario files of one family; ``launch-straggler`` and ``launch_straggler`` alike."""
    folder = FAMILIES / family.replace("-", "_")
    if not folder.is_dir():
        raise KeyError(f"no scenario family {family!r}; known: {', '.join(family_names())}")
    return sorted(folder.glob("*.toml"))


def load_scenario(name_or_path: str | Path) -> Scenario:
    """A library scenario by name, or a scenario file by path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = LIBRARY / f"{name_or_path}.toml"
        if not path.exists():
            raise KeyError(f"no scenario {name_or_path!r}; known: {', '.join(scenario_names())}")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(f"{path}: not valid TOML: {error}") from None
    return parse_scenario(raw, default_name=path.stem, where=str(path))


# Every key a scenario file may hold at its top level, and in its [cluster] table.
_TOP_KEYS = frozenset(
    {"name", "description", "duration_s", "start_ns", "cluster", "job", "fault", "background",
     "quirks", "mixture", "telemetry", "benign", "evaluation"}
)  # fmt: skip


@dataclass(frozen=True)
class ClusterSection:
    nodes: int = 16
    gpus_per_node: int = 8
    profiles: dict[str, int] = field(default_factory=dict)
    roce_nodes: int = 0
    name: str = "sim"


@dataclass(frozen=True)
class MixtureSection:
    faults: int = 0


def parse_scenario(
    raw: dict[str, Any], default_name: str = "scenario", where: str | None = None
) -> Scenario:
    """A Scenario from parsed TOML; raises ScenarioError naming the file and the key for an
    unknown key, a value of the wrong type, or an index out of range."""
    where = where or f"scenario {default_name}"
    try:
        return _parse_scenario(raw, default_name, where)
    except ScenarioError:
        raise
    except ConfigError as error:  # already names the table and key
        raise ScenarioError(str(error)) from None
    except (TypeError, AttributeError, KeyError, ValueError) as error:
        # Whatever slipped past the checks must still not escape as a traceback.
        raise ScenarioError(f"{where}: {type(error).__name__}: {error}") from None


def _parse_scenario(raw: dict[str, Any], default_name: str, where: str) -> Scenario:
    unknown_keys = sorted(set(raw) - _TOP_KEYS)
    if unknown_keys:
        known = ", ".join(sorted(_TOP_KEYS))
        raise ScenarioError(f"{where}: unknown keys {unknown_keys} (known: {known})")
    cluster_section = section_as(
        raw.get("cluster", {}), ClusterSection, where=f"{where}: [cluster]"
    )
    cluster = raw.get("cluster", {})
    nodes = cluster_section.nodes
    profiles = {
        str(k): int(v) for k, v in cluster.get("profiles", {"h100-sxm5-80gb": nodes}).items()
    }
    unknown = set(profiles) - set(load_profiles())
    if unknown:
        raise ValueError(f"unknown hardware profiles {sorted(unknown)}")
    if sum(profiles.values()) != nodes:
        raise ValueError(f"profile node counts sum to {sum(profiles.values())}, not {nodes}")
    jobs = tuple(
        _job(entry, f"{where}: [[job]] #{n + 1}") for n, entry in enumerate(raw.get("job", []))
    )
    faults = tuple(
        _fault(entry, f"{where}: [[fault]] #{n + 1}")
        for n, entry in enumerate(raw.get("fault", []))
    )
    duration = raw.get("duration_s", 600)
    if isinstance(duration, bool) or not isinstance(duration, int | float) or duration <= 0:
        raise ScenarioError(f"{where}: duration_s: expected a positive number, got {duration!r}")
    scenario = Scenario(
        name=str(raw.get("name", default_name)),
        description=str(raw.get("description", "")),
        duration_s=float(duration),
        nodes=nodes,
        gpus_per_node=cluster_section.gpus_per_node,
        profiles=profiles,
        roce_nodes=cluster_section.roce_nodes,
        jobs=jobs,
        faults=faults,
        background=section_as(
            raw.get("background", {}), BackgroundRates, where=f"{where}: [background]"
        ),
        quirks=section_as(raw.get("quirks", {}), Quirks, where=f"{where}: [quirks]"),
        mixture_faults=section_as(
            raw.get("mixture", {}), MixtureSection, where=f"{where}: [mixture]"
        ).faults,
        cluster_name=cluster_section.name,
        start_ns=int(raw.get("start_ns", DEFAULT_START_NS)),
        agent_down=_agent_down(raw.get("telemetry", {})),
        **_telemetry_switches(raw.get("telemetry", {})),
        benign=tuple(
            section_as(entry, BenignEpisode, where=f"{where}: [[benign]] #{n + 1}")
            for n, entry in enumerate(raw.get("benign", []))
        ),
        evaluation=section_as(
            raw.get("evaluation", {}), EvaluationSection, where=f"{where}: [evaluation]"
        ),
    )
    _check_jobs_fit(scenario)
    _check_faults(scenario, where)
    _check_benign(scenario, where)
    return scenario


MEMBERSHIP_OPTIONAL = {"gpu", "profile"}  # what a real training hook may not know


_TELEMETRY_SWITCHES = ("gpu_info", "gpu_topology", "host_disk")


def _telemetry_switches(telemetry: dict[str, Any]) -> dict[str, bool]:
    out = {}
    for name in _TELEMETRY_SWITCHES:
        if name in telemetry:
            if not isinstance(telemetry[name], bool):
                raise ValueError(f"[telemetry] {name} is true or false, not {telemetry[name]!r}")
            out[name] = telemetry[name]
    return out


def _agent_down(telemetry: dict[str, Any]) -> tuple[str, ...]:
    unknown = set(telemetry) - {"agent_down", *_TELEMETRY_SWITCHES}
    if unknown:
        raise ValueError(
            f"[telemetry] knows agent_down, {', '.join(_TELEMETRY_SWITCHES)}, not {sorted(unknown)}"
        )
    nodes = telemetry.get("agent_down", [])
    if not isinstance(nodes, list):
        raise ValueError('agent_down is a list of node names, or ["all"]')
    return tuple(str(node) for node in nodes)


def _job(entry: dict[str, Any], where: str) -> JobConfig:
    job = section_as(entry, JobConfig, where=where)
    if set(job.membership_omits) - MEMBERSHIP_OPTIONAL:
        raise ScenarioError(
            f"{where}.membership_omits: may name only {sorted(MEMBERSHIP_OPTIONAL)}"
        )
    for key in ("nodes", "pp", "tp"):
        if getattr(job, key) < 1:
            raise ScenarioError(f"{where}.{key}: must be at least 1, got {getattr(job, key)}")
    return job


def _fault(entry: dict[str, Any], where: str) -> FaultConfig:
    # Keys the fault config does not declare are the fault type's own parameters.
    known = {f.name for f in dataclasses.fields(FaultConfig)} - {"params"}
    params = {k: v for k, v in entry.items() if k not in known}
    fault = section_as({k: v for k, v in entry.items() if k in known}, FaultConfig, where=where)
    return dataclasses.replace(fault, params=params)


def _check_faults(scenario: Scenario, where: str) -> None:
    """Indexes in range: a job_node past the job's size once wrapped around silently."""
    jobs = {job.name: job for job in scenario.jobs}
    for n, fault in enumerate(scenario.faults):
        at = f"{where}: [[fault]] #{n + 1}"
        if fault.job is not None and fault.job not in jobs:
            raise ScenarioError(f"{at}.job: no job {fault.job!r} (jobs: {sorted(jobs)})")
        if fault.job is not None and not 0 <= fault.job_node < jobs[fault.job].nodes:
            size = jobs[fault.job].nodes
            raise ScenarioError(f"{at}.job_node: {fault.job_node} is not in 0..{size - 1}")
        if not 0 <= fault.gpu < scenario.gpus_per_node:
            last = scenario.gpus_per_node - 1
            raise ScenarioError(f"{at}.gpu: {fault.gpu} is not in 0..{last}")
        if not 0 <= fault.onset_s <= scenario.duration_s:
            raise ScenarioError(
                f"{at}.onset_s: {fault.onset_s} is outside 0..{scenario.duration_s}"
            )


def _check_benign(scenario: Scenario, where: str) -> None:
    jobs = {job.name for job in scenario.jobs}
    for n, episode in enumerate(scenario.benign):
        at = f"{where}: [[benign]] #{n + 1}"
        needs = BENIGN_KINDS.get(episode.kind)
        if needs is None:
            raise ScenarioError(f"{at}.kind: {episode.kind!r} is not one of {sorted(BENIGN_KINDS)}")
        if needs == "job" and episode.job not in jobs:
            raise ScenarioError(f"{at}.job: no job {episode.job!r} (jobs: {sorted(jobs)})")
        if needs == "node" and not _is_node(episode.node, scenario.nodes):
            raise ScenarioError(f"{at}.node: {episode.node!r} is not a node of the cluster")
        if episode.kind == "app_xid" and episode.code not in APPLICATION_XIDS:
            raise ScenarioError(f"{at}.code: {episode.code} is not in {sorted(APPLICATION_XIDS)}")
        if not 0 <= episode.gpu < scenario.gpus_per_node or episode.count < 1:
            raise ScenarioError(f"{at}: gpu out of range or count below 1")
        if episode.kind == "cpu_pressure" and not 1.0 <= episode.factor <= 1.1:
            raise ScenarioError(f"{at}.factor: a benign CPU pressure slows by 1.0-1.1, "
                                f"not {episode.factor}")  # fmt: skip
        if episode.kind == "workload_heavier":
            _check_heavier_workload(episode, at)


def _check_heavier_workload(episode: BenignEpisode, at: str) -> None:
    if not 1.0 < episode.factor <= 2.0:
        raise ScenarioError(f"{at}.factor: a heavier workload slows steps by more than 1.0 "
                            f"and at most 2.0, not {episode.factor}")  # fmt: skip
    if not 1.0 <= episode.power <= 1.5:
        raise ScenarioError(f"{at}.power: a heavier workload draws 1.0-1.5 times its "
                            f"training power, not {episode.power}")  # fmt: skip
    if episode.duration_s <= 0:
        raise ScenarioError(f"{at}.duration_s: must be positive, not {episode.duration_s}")


def _is_node(name: str | None, nodes: int) -> bool:
    prefix, _, number = (name or "").rpartition("-")
    return prefix == "node" and number.isdigit() and 1 <= int(number) <= nodes


def _check_jobs_fit(scenario: Scenario) -> None:
    placed = {name for job in scenario.jobs for name in job.nodes_list}
    needed = sum(job.nodes for job in scenario.jobs if not job.nodes_list) + len(placed)
    if needed > scenario.nodes:
        raise ValueError(f"jobs need {needed} nodes, the cluster has {scenario.nodes}")
    for job in scenario.jobs:
        if job.nodes_list and (
            len(job.nodes_list) != job.nodes
            or not all(_is_node(name, scenario.nodes) for name in job.nodes_list)
        ):
            raise ValueError(f"job {job.name}: nodes_list must name {job.nodes} cluster nodes")
        gpus = job.nodes * scenario.gpus_per_node
        if gpus % (job.tp * job.pp):
            raise ValueError(f"job {job.name}: {gpus} GPUs do not divide into tp*pp")


def scale_scenario(scenario: Scenario, gpus: int) -> Scenario:
    """The same scenario on about ``gpus`` GPUs: node, profile and job sizes scale together."""
    nodes = max(1, -(-gpus // scenario.gpus_per_node))
    factor = nodes / scenario.nodes
    names = list(scenario.profiles)
    counts = [max(1, round(scenario.profiles[n] * factor)) for n in names]
    counts[-1] = max(1, nodes - sum(counts[:-1]))
    while sum(counts) > nodes:  # rounding overshoot on tiny clusters
        counts[counts.index(max(counts))] -= 1
    jobs = tuple(_scaled_job(job, factor, scenario.gpus_per_node) for job in scenario.jobs)
    return dataclasses.replace(
        scenario,
        nodes=nodes,
        profiles=dict(zip(names, counts, strict=True)),
        roce_nodes=round(scenario.roce_nodes * factor),
        jobs=jobs,
    )


def _scaled_job(job: JobConfig, factor: float, gpus_per_node: int) -> JobConfig:
    if job.nodes_list:  # placed by name: the scenario's own layout, not a size to scale
        return job
    # Keep whole pipeline replicas: scale the data-parallel degree, never pp or tp.
    nodes_per_replica = max(1, job.pp * job.tp // gpus_per_node)
    replicas = max(1, int(job.nodes * factor) // nodes_per_replica)
    return dataclasses.replace(job, nodes=replicas * nodes_per_replica)
