"""The fault catalogue: each fault type as episodes, events, job incidents and a label.

A builder gets the fault's resolved location and returns what it does to telemetry
(:class:`Episode`), what it logs (:class:`EventRecord`), what it does to the job
(:class:`JobIncident`) and the ground truth a correct localization must match
(:class:`FaultLabel`). Magnitudes are defaults that a scenario may override per fault.

>>> from reflex_localize.simulator.scenario import load_scenario, FaultConfig
>>> from reflex_localize.simulator.cluster import build_cluster
>>> import numpy as np
>>> cluster = build_cluster(load_scenario("demo"))
>>> out = build_fault(FaultConfig("xid79", 300.0, node="node-0003", gpu=2), 0, Context(
...     cluster, np.random.default_rng(0), 600.0, 0, "demo"))
>>> out.label.fault_class, out.label.node, out.label.index, out.events[0].fields["code"]
('explicit', 'node-0003', '2', 79)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from reflex_localize.simulator.cascade import JobIncident, crash, hang
from reflex_localize.simulator.cluster import ClusterSpec, JobSpec
from reflex_localize.simulator.effects import Episode
from reflex_localize.simulator.events import EventRecord
from reflex_localize.simulator.scenario import FaultConfig
from reflex_localize.simulator.topology import kernel_bus_id, pci_bus_id

# Throttle reason bits (nvmlDeviceGetCurrentClocksEventReasons).
SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, POWER_BRAKE = 0x4, 0x8, 0x20, 0x40, 0x80


@dataclass(frozen=True)
class FaultLabel:
    """Ground truth for one injected fault: what a correct localization must name.

    ``expect`` is "hardware" (name node, component and index) or "no_hardware_fault"
    (a localization must say the slowdown is not hardware, e.g. pipeline imbalance).

    >>> FaultLabel("f1", "xid79", "explicit", "node-0003", "gpu", "2", 1, 2, "j", "hardware",
    ...            "GPU fell off the bus").as_dict()["index"]
    '2'
    """

    fault_id: str
    fault_type: str
    fault_class: str  # "explicit" | "implicit" | "none"
    node: str
    component: str  # "gpu" | "nic" | "host" | "node" | "none"
    index: str  # GPU index, "mlx5_N/1", or ""
    onset_ns: int
    end_ns: int
    job: str
    expect: str
    description: str

    def as_dict(self) -> dict[str, str | int]:
        return asdict(self)


@dataclass
class FaultOutput:
    episodes: list[Episode] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    incidents: list[JobIncident] = field(default_factory=list)
    label: FaultLabel | None = None
    index: str | None = None  # the label's index, where the component's default does not fit


@dataclass(frozen=True)
class Context:
    cluster: ClusterSpec
    rng: np.random.Generator
    duration_s: float
    start_ns: int
    scenario: str


@dataclass(frozen=True)
class Where:
    """A fault's resolved location and time span."""

    node: int
    node_name: str
    gpu: int  # local GPU index on the node
    gpu_global: int
    port_global: int
    hca: str
    job: JobSpec | None
    onset_s: float
    end_s: float
    params: dict

    def p(self, name: str, default: float) -> float:
        return float(self.params.get(name, default))


Builder = Callable[[Where, Context, FaultOutput], None]
CATALOGUE: dict[str, tuple[str, str, Builder]] = {}  # type -> (class, component, builder)


def fault(kind: str, fault_class: str, component: str) -> Callable[[Builder], Builder]:
    def register(builder: Builder) -> Builder:
        CATALOGUE[kind] = (fault_class, component, builder)
        return builder

    return register


def fault_types() -> list[str]:
    return sorted(CATALOGUE)


def build_fault(config: FaultConfig, number: int, ctx: Context) -> FaultOutput:
    if config.type not in CATALOGUE:
        raise ValueError(f"unknown fault type {config.type!r}; known: {', '.join(fault_types())}")
    fault_class, component, builder = CATALOGUE[config.type]
    where = _resolve(config, ctx)
    out = FaultOutput()
    builder(where, ctx, out)
    index = out.index or {"gpu": str(where.gpu), "nic": f"{where.hca}/1"}.get(component, "")
    no_hardware = fault_class == "none" or config.type == "software_crash"
    out.label = FaultLabel(
        fault_id=f"{ctx.scenario}-{number:03d}-{config.type}",
        fault_type=config.type,
        fault_class=fault_class,
        node="" if fault_class == "none" else where.node_name,
        component="none" if no_hardware else component,
        index="" if no_hardware else index,
        onset_ns=ctx.start_ns + int(where.onset_s * 1e9),
        end_ns=ctx.start_ns + int(where.end_s * 1e9),
        job=where.job.name if where.job else "",
        expect="no_hardware_fault" if no_hardware else "hardware",
        description=DESCRIPTIONS[config.type],
    )
    return out


def _resolve(config: FaultConfig, ctx: Context) -> Where:
    cluster = ctx.cluster
    if config.node is not None:
        node = cluster.node_index(config.node)
    elif config.job is not None:
        named = next(j for j in cluster.jobs if j.name == config.job)
        node = cluster.node_index(named.nodes[config.job_node % len(named.nodes)])
    else:
        raise ValueError(f"fault {config.type}: give node, or job and job_node")
    if not 0 <= node < len(cluster.nodes):
        raise ValueError(f"fault {config.type}: node {config.node} is not in the cluster")
    gpus = cluster.gpus_per_node
    job = (
        next(j for j in cluster.jobs if j.name == config.job)
        if config.job is not None
        else cluster.job_of_node(node)
    )
    onset = config.onset_s
    if config.from_job_start:
        if job is None:
            raise ValueError(f"fault {config.type}: from_job_start, but no job runs on the node")
        onset += job.start_s
    end = ctx.duration_s if config.duration_s is None else onset + config.duration_s
    gpu = config.gpu if config.type not in PORT_FAULTS else config.port
    return Where(
        node=node,
        node_name=cluster.nodes[node].name,
        gpu=gpu % gpus,
        gpu_global=node * gpus + gpu % gpus,
        port_global=node * gpus + config.port % gpus,
        hca=cluster.nodes[node].hcas[config.port % gpus],
        job=job,
        onset_s=onset,
        end_s=min(end, ctx.duration_s),
        params=config.params,
    )


PORT_FAULTS = {"ib_flapping", "ib_link_down", "pfc_storm", "ib_rate_degraded", "ib_link_flap"}


def _one(index: int) -> np.ndarray:
    return np.array([index])


def _node_gpus(where: Where, ctx: Context) -> np.ndarray:
    gpus = ctx.cluster.gpus_per_node
    return np.arange(where.node * gpus, (where.node + 1) * gpus)


def _xid(where: Where, ctx: Context, at_s: float, code: int, message: str) -> EventRecord:
    return EventRecord(
        ctx.start_ns + int(at_s * 1e9),
        where.node_name,
        "nvml",
        "xid",
        {"code": code, "gpu": where.gpu, "device": pci_bus_id(where.gpu), "message": message},
    )


def _crash(where: Where, ctx: Context, out: FaultOutput, at_s: float, reason: str) -> None:
    if where.job is None or at_s >= where.job.end_s or at_s < where.job.start_s:
        return  # no job on the node: the fault logs, nothing cascades
    events, incident = crash(where.job, at_s, where.gpu_global, reason, ctx.rng, ctx.start_ns)
    out.events += events
    out.incidents.append(incident)


def _persist(out: FaultOutput, level: str, entities: np.ndarray, where: Where, **effects: float):
    for effect, value in effects.items():
        out.episodes.append(Episode(level, entities, where.onset_s, where.end_s, effect, value))


# ---- memory and ECC ---------------------------------------------------------------------------


def _ecc_xid(code: int, meaning: str) -> Builder:
    def build(where: Where, ctx: Context, out: FaultOutput) -> None:
        gpu, t = _one(where.gpu_global), where.onset_s
        out.episodes += [
            Episode("gpu", gpu, t - 20, t, "ecc_corrected", 0.5),  # a few SBEs lead up to it
            Episode("gpu", gpu, t, t + 1, "ecc_uncorrected", 1),
            Episode("gpu", gpu, t, t + 1, "remap_uncorrectable", 1),
            Episode("gpu", gpu, t, where.end_s, "remap_pending", 1),
        ]
        out.events.append(_xid(where, ctx, t, code, f"Xid {code}, {meaning}"))
        _crash(where, ctx, out, t, f"CUDA error: uncorrectable ECC error encountered (Xid {code})")

    return build


for _code, _meaning in ((48, "DBE (double bit error)"), (94, "Contained ECC error"),
                        (95, "Uncontained ECC error")):  # fmt: skip
    fault(f"xid{_code}", "explicit", "gpu")(_ecc_xid(_code, _meaning))


@fault("row_remap_exhaustion", "explicit", "gpu")
def _row_remap(where: Where, ctx: Context, out: FaultOutput) -> None:
    gpu, t = _one(where.gpu_global), where.onset_s
    t63 = t + where.p("ramp_s", 120.0)
    t64 = t63 + where.p("gap_s", 60.0)
    out.episodes += [
        Episode("gpu", gpu, t, t63, "ecc_corrected", where.p("ecc_rate", 30.0), ramp=True),
        Episode("gpu", gpu, t63, t64, "ecc_corrected", where.p("ecc_rate", 30.0)),
        Episode("gpu", gpu, t, t64, "remap_correctable", 0.08),
        Episode("gpu", gpu, t63, where.end_s, "remap_pending", 1),
        Episode("gpu", gpu, t64, where.end_s, "remap_failure", 1),
        Episode("gpu", gpu, t64, t64 + 1, "ecc_uncorrected", 1),
    ]
    out.events.append(_xid(where, ctx, t63, 63, "Xid 63, Row remapping event recorded"))
    out.events.append(_xid(where, ctx, t64, 64, "Xid 64, Row remapping failed: no spare rows"))
    _crash(where, ctx, out, t64, "CUDA error: uncorrectable ECC error encountered")


# ---- interconnect -----------------------------------------------------------------------------


@fault("xid74", "explicit", "gpu")
def _xid74(where: Where, ctx: Context, out: FaultOutput) -> None:
    gpu, t = _one(where.gpu_global), where.onset_s
    t74 = t + where.p("ramp_s", 90.0)
    out.episodes += [
        Episode("gpu", gpu, t, t74, "nvlink_crc", where.p("crc_rate", 200.0), ramp=True),
        Episode("gpu", gpu, t, t74, "comm", 1.15),
        Episode("gpu", gpu, t74, where.end_s, "nvlink_down", 2),
    ]
    out.events.append(_xid(where, ctx, t74, 74, "Xid 74, NVLink: fatal error detected"))
    _crash(where, ctx, out, t74, "NCCL error: unhandled system error (NVLink)")


@fault("nvlink_degradation", "implicit", "gpu")
def _nvlink_degradation(where: Where, ctx: Context, out: FaultOutput) -> None:
    _persist(
        out, "gpu", _one(where.gpu_global), where,
        nvlink_down=where.p("links_down", 4), nvlink_crc=where.p("crc_rate", 8.0),
        comm=where.p("comm", 2.0),
    )  # fmt: skip


@fault("pcie_downgrade", "implicit", "gpu")
def _pcie_downgrade(where: Where, ctx: Context, out: FaultOutput) -> None:
    _persist(
        out, "gpu", _one(where.gpu_global), where,
        pcie_width=where.p("width", 8), pcie_replay=where.p("replay_rate", 0.3),
        comm=where.p("comm", 1.8), compute=1.03,
    )  # fmt: skip


@fault("ib_flapping", "implicit", "nic")
def _ib_flapping(where: Where, ctx: Context, out: FaultOutput) -> None:
    # The defaults are a bad cable: 40 symbol and 3 receive errors a second, a retrain every
    # ~20 s. A scenario may make the port quiet instead (a healthy-but-noisy link): a trickle
    # of ``symbol_rate``, a trickle of ``rcv_rate`` (0: no packet dropped), ``comm = 1`` and
    # ``flap_every_s = 0`` (the link never retrains).
    port = _one(where.port_global)
    rcv = where.p("rcv_rate", 3.0)
    _persist(out, "port", port, where, symbol_error=where.p("symbol_rate", 40.0))
    if rcv > 0:
        _persist(out, "port", port, where, rcv_error=rcv)
    if where.params.get("ring_paced", False):  # opt-in: the library keeps the older model
        _rail_paced(out, where, where.onset_s, where.end_s, where.p("comm", 1.8))
    else:
        _persist(out, "port", port, where, comm=where.p("comm", 1.8))
    every = where.p("flap_every_s", 20.0)
    if every <= 0:
        return  # no link retrain (and no jitter drawn from the rng)
    for t in np.arange(where.onset_s, where.end_s, every):
        jitter = float(ctx.rng.uniform(0, every / 2))
        out.episodes.append(Episode("port", port, t + jitter, t + jitter + 1, "recovery", 1))


@fault("ib_link_down", "explicit", "nic")
def _ib_link_down(where: Where, ctx: Context, out: FaultOutput) -> None:
    port, t = _one(where.port_global), where.onset_s
    out.episodes += [
        Episode("port", port, t - 30, t, "symbol_error", 20.0, ramp=True),
        Episode("port", port, t, where.end_s, "port_state", 1),
        Episode("port", port, t, t + 1, "downed", 1),
    ]
    device = f"{where.hca}/1"
    out.events.append(
        EventRecord(
            ctx.start_ns + int(t * 1e9),
            where.node_name,
            "kmsg",
            "link_down",
            {"device": device, "message": f"{where.hca}: port 1 link down (phys state Polling)"},
        )
    )
    if where.end_s < ctx.duration_s:
        out.events.append(
            EventRecord(
                ctx.start_ns + int(where.end_s * 1e9),
                where.node_name,
                "kmsg",
                "link_up",
                {"device": device, "message": f"{where.hca}: port 1 link up"},
            )
        )
    _crash(where, ctx, out, t, "NCCL error: remote process exited or there was a network error")


@fault("pfc_storm", "implicit", "nic")
def _pfc_storm(where: Where, ctx: Context, out: FaultOutput) -> None:
    if ctx.cluster.nodes[where.node].link_layer != "Ethernet":
        raise ValueError(f"pfc_storm needs a RoCE node; {where.node_name} is InfiniBand")
    _persist(out, "port", _one(where.port_global), where, pfc_tx=where.p("pause_rate", 120000.0))
    # Pauses back-propagate: every port the job talks through stalls and slows its ranks.
    victims = where.job.rank_gpu if where.job else _node_gpus(where, ctx)
    _persist(
        out, "port", np.unique(victims), where, pfc_rx=20000.0, xmit_wait=4e7,
        comm=where.p("comm", 1.9),
    )  # fmt: skip


# ---- GPU --------------------------------------------------------------------------------------


@fault("xid79", "explicit", "gpu")
def _xid79(where: Where, ctx: Context, out: FaultOutput) -> None:
    t = where.onset_s
    out.episodes.append(Episode("gpu", _one(where.gpu_global), t, where.end_s, "lost", 1))
    out.events.append(_xid(where, ctx, t, 79, "Xid 79, GPU has fallen off the bus"))
    out.events.append(
        EventRecord(
            ctx.start_ns + int((t + 1.0) * 1e9),
            where.node_name,
            "nvml",
            "gpu_lost",
            {"gpu": where.gpu, "device": pci_bus_id(where.gpu), "message": "NVML: GPU is lost"},
        )
    )
    _crash(where, ctx, out, t, "CUDA error: unspecified launch failure")


@fault("xid119", "explicit", "gpu")
def _xid119(where: Where, ctx: Context, out: FaultOutput) -> None:
    t = where.onset_s
    out.events.append(_xid(where, ctx, t, 119, "Xid 119, Timeout after 6s of waiting for RPC"))
    _persist(out, "gpu", _one(where.gpu_global), where, power=0.5, clock=0.3)
    _crash(where, ctx, out, t, "CUDA error: unspecified launch failure")


@fault("thermal_throttle", "implicit", "gpu")
def _thermal(where: Where, ctx: Context, out: FaultOutput) -> None:
    gpu, t = _one(where.gpu_global), where.onset_s
    heat, rise = where.p("temp_rise", 24.0), where.p("rise_s", 60.0)
    clock = where.p("clock", 0.72)
    out.episodes += [
        Episode("gpu", gpu, t, t + rise, "temp", heat, ramp=True),
        Episode("gpu", gpu, t + rise, where.end_s, "temp", heat),
    ]
    hot = Where(**{**where.__dict__, "onset_s": t + rise / 2})
    _persist(
        out, "gpu", gpu, hot, throttle=SW_THERMAL | HW_THERMAL, clock=clock, power=0.85,
        compute=clock**-0.9,
    )  # fmt: skip


@fault("power_brake", "implicit", "node")
def _power_brake(where: Where, ctx: Context, out: FaultOutput) -> None:
    clock = where.p("clock", 0.5)
    _persist(
        out, "gpu", _node_gpus(where, ctx), where, throttle=POWER_BRAKE | HW_SLOWDOWN,
        clock=clock, power=0.45, compute=clock**-0.9,
    )  # fmt: skip


@fault("fail_slow_gpu", "implicit", "gpu")
def _fail_slow(where: Where, ctx: Context, out: FaultOutput) -> None:
    # Clock stuck low with no throttle reason: nothing logs it, only the numbers show it. A
    # scenario may set the compute slowdown itself when it models a reported step time.
    clock = where.p("clock", 0.6)
    _persist(out, "gpu", _one(where.gpu_global), where, clock=clock,
             power=where.p("power", 0.75),
             compute=where.p("compute", clock**-0.9))  # fmt: skip


# ---- host -------------------------------------------------------------------------------------


@fault("host_contention", "implicit", "host")
def _host_contention(where: Where, ctx: Context, out: FaultOutput) -> None:
    _persist(
        out, "host", _one(where.node), where, psi_cpu=0.45, psi_memory=0.3,
        psi_memory_full=0.1, mem_available=0.08, cpu_busy=0.5, load=180.0,
        compute=where.p("compute", 1.35),
    )  # fmt: skip


@fault("io_stall", "implicit", "host")
def _io_stall(where: Where, ctx: Context, out: FaultOutput) -> None:
    _persist(
        out, "host", _one(where.node), where, psi_io=0.7, psi_io_full=0.4, iowait=0.35,
        load=40.0, compute=where.p("compute", 1.5),
    )  # fmt: skip


# ---- job level --------------------------------------------------------------------------------


@fault("nccl_hang", "implicit", "node")
def _nccl_hang(where: Where, ctx: Context, out: FaultOutput) -> None:
    if where.job is None:
        raise ValueError(f"nccl_hang: no job runs on {where.node_name}")
    # The cause: a rank stuck on its host (D state), so its GPUs go idle while peers spin.
    _persist(out, "host", _one(where.node), where, psi_io=0.6, psi_io_full=0.55, iowait=0.4)
    events, incident = hang(where.job, where.onset_s, where.node, ctx.rng, ctx.start_ns)
    out.events += events
    out.incidents.append(incident)


@fault("sdc", "implicit", "gpu")
def _sdc(where: Where, ctx: Context, out: FaultOutput) -> None:
    if where.job is None:
        raise ValueError(f"sdc: no job runs on {where.node_name}")
    rank = int(np.flatnonzero(where.job.rank_gpu == where.gpu_global)[0])
    replica = int(where.job.dp_rank[rank])
    out.incidents.append(JobIncident("loss_spike", where.job.name, where.onset_s, value=replica))


@fault("software_crash", "explicit", "gpu")
def _software_crash(where: Where, ctx: Context, out: FaultOutput) -> None:
    _crash(where, ctx, out, where.onset_s, "RuntimeError: shape mismatch in collate_fn")


# ---- compound and not-hardware ----------------------------------------------------------------


@fault("compound_benign", "implicit", "node")
def _compound(where: Where, ctx: Context, out: FaultOutput) -> None:
    # Each piece alone is within normal background; together they slow one rank ~15 %. The
    # knobs (defaults: the pieces above) let a scenario make the compound smaller.
    gpu, port = _one(where.gpu_global), _one(where.port_global)
    _persist(out, "gpu", gpu, where, ecc_corrected=where.p("ecc_rate", 0.4),
             pcie_replay=where.p("replay_rate", 0.25),
             compute=where.p("gpu_compute", 1.04))  # fmt: skip
    every, lasting = where.p("throttle_every_s", 40.0), where.p("throttle_s", 12.0)
    for t in np.arange(where.onset_s, where.end_s, every):
        out.episodes += [
            Episode("gpu", gpu, t, t + lasting, "throttle", SW_THERMAL),
            Episode("gpu", gpu, t, t + lasting, "clock", 0.93),
            Episode("gpu", gpu, t, t + lasting, "compute", 1.07),
        ]
    _persist(out, "port", port, where, symbol_error=where.p("symbol_rate", 1.5),
             comm=where.p("comm", 1.12))  # fmt: skip
    _persist(out, "host", _one(where.node), where, psi_cpu=where.p("psi_cpu", 0.12),
             cpu_busy=0.1, compute=where.p("host_compute", 1.05))  # fmt: skip


@fault("pipeline_imbalance", "none", "none")
def _pipeline_imbalance(where: Where, ctx: Context, out: FaultOutput) -> None:
    if where.job is None:
        raise ValueError("pipeline_imbalance needs a job")
    factor = where.p("last_stage_factor", 1.35)
    out.incidents.append(JobIncident("stage_factor", where.job.name, where.onset_s, value=factor))


@fault("seqlen_imbalance", "none", "none")
def _seqlen_imbalance(where: Where, ctx: Context, out: FaultOutput) -> None:
    if where.job is None:
        raise ValueError("seqlen_imbalance needs a job")
    sigma = where.p("seq_noise", 0.18)
    out.incidents.append(JobIncident("seq_noise", where.job.name, where.onset_s, value=sigma))


# ---- faults that show only in fields read rarely (issue 16: rate, speed, limits, disks) ------

# Share of a rank's communication time bound by its rail's bandwidth: large gradient
# all-reduces run at the pace of the slowest link of the ring (NCCL ring time ~ 2(n-1)/n * S/B),
# the rest is NVLink, latency and launch overhead that a slow HCA does not touch.
RAIL_BOUND_SHARE = 0.8


def _rail_slowdown(rate_ratio: float) -> float:
    return 1 + RAIL_BOUND_SHARE * (1 / rate_ratio - 1)


@fault("ib_rate_degraded", "implicit", "nic")
def _ib_rate_degraded(where: Where, ctx: Context, out: FaultOutput) -> None:
    # The port retrained at a lower width or speed (4X NDR 400 -> 200 Gb/s: a bad lane in a
    # cable or transceiver). It stays Active and no error counter moves; only ports/1/rate,
    # the rank's slower communication and its ring neighbour's waiting show it.
    ratio = where.p("rate_ratio", 0.5)
    _persist(out, "port", _one(where.port_global), where, link_rate=ratio)
    _rail_paced(out, where, where.onset_s, where.end_s, where.p("comm", _rail_slowdown(ratio)))
    _sender_waits(where, ctx, out)


def _rail_paced(out: FaultOutput, where: Where, start_s: float, end_s: float, comm: float) -> None:
    """The rank behind a slow rail communicates slower, and its ring moves at that pace: every
    port of the ring carries the same bytes per step, so the slow port's byte counters do not
    stand out from its peers'. The slowdown goes on the rank's communication (the GPU served by
    the rail shares its index), not on the port, whose own ``comm`` would thin its traffic alone."""
    out.episodes.append(Episode("gpu", _one(where.port_global), start_s, end_s, "comm", comm))


@fault("ib_link_flap", "implicit", "nic")
def _ib_link_flap(where: Where, ctx: Context, out: FaultOutput) -> None:
    # The link drops for a few seconds and comes back, again and again; NCCL's IB retries
    # (NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT) ride each drop out, but the ring stalls meanwhile.
    port = _one(where.port_global)
    every, down = where.p("flap_every_s", 90.0), where.p("down_s", 4.0)
    stall = where.p("stall_comm", 3.0)
    lead = where.job.config.step_s if where.job is not None else 5.0
    _persist(out, "port", port, where, symbol_error=where.p("symbol_rate", 4.0))
    device = f"{where.hca}/1"
    for t in np.arange(where.onset_s, where.end_s, every):
        start = float(t + ctx.rng.uniform(0, every / 3))
        if start >= where.end_s:
            break
        out.episodes += [
            Episode("port", port, start, start + down, "port_state", 1),
            Episode("port", port, start, start + 1, "downed", 1),
            Episode("port", port, start + down, start + down + 1, "recovery", 1),
        ]
        # The step model reads a step's slowdown at its start: every step under way during
        # the drop started at most one step before it.
        _rail_paced(out, where, start - lead, start + down + 1, stall)
        out.events += [
            _link_event(where, ctx, start, "link_down", device, "link down (phys state Polling)"),
            _link_event(where, ctx, start + down, "link_up", device, "link up"),
        ]
    _sender_waits(where, ctx, out)


def _link_event(where: Where, ctx: Context, at_s: float, kind: str, device: str, text: str):
    message = f"{where.hca}: port 1 {text}"
    return EventRecord(
        ctx.start_ns + int(at_s * 1e9),
        where.node_name,
        "kmsg",
        kind,
        {"device": device, "message": message},
    )


def _sender_waits(where: Where, ctx: Context, out: FaultOutput) -> None:
    """The port that sends into the slow one waits for credits: InfiniBand flow control stops
    the sender when the receiver's link drains slower, so ``port_xmit_wait`` climbs on the
    ring neighbour upstream (same rail, previous data-parallel replica of the same stage; the
    previous pipeline stage when there is one replica), not on the slow port itself."""
    job = where.job
    if job is None or len(job.nodes) < 2 or where.node_name not in job.nodes:
        return
    k = job.nodes.index(where.node_name)
    stage, replica = divmod(k, job.dp)
    if job.dp > 1:
        sender = stage * job.dp + (replica - 1) % job.dp
    else:
        sender = stage - 1 if stage > 0 else stage + 1
    node = ctx.cluster.node_index(job.nodes[sender])
    port = node * ctx.cluster.gpus_per_node + where.port_global % ctx.cluster.gpus_per_node
    _persist(out, "port", _one(port), where, xmit_wait=where.p("sender_wait", 3e7))


@fault("nic_speed_degraded", "implicit", "nic")
def _nic_speed_degraded(where: Where, ctx: Context, out: FaultOutput) -> None:
    # The node's Ethernet link negotiated below its rated speed (25 -> 10 Gb/s: a cable, a
    # transceiver, a switch port): operstate up, no error, only speed_mbps is low. Dataloader
    # and storage traffic squeeze through it, so the node's ranks wait a little for data.
    node = _one(where.node)
    _persist(out, "nic", node, where, nic_speed=where.p("speed_ratio", 0.4))
    _persist(out, "host", node, where, compute=where.p("compute", 1.06))
    out.index = "eth0"


@fault("power_cap", "implicit", "gpu")
def _power_cap(where: Where, ctx: Context, out: FaultOutput) -> None:
    # An enforced power limit set below the board's default (nvidia-smi -pl, a management
    # policy left behind): the driver holds the clocks down under the software power cap.
    clock = where.p("clock", 0.8)
    _persist(
        out,
        "gpu",
        _one(where.gpu_global),
        where,
        power_limit=where.p("limit_ratio", 0.64),
        throttle=SW_POWER_CAP,
        clock=clock,
        compute=where.p("compute", clock**-0.9),
    )


@fault("hbm_clock_low", "implicit", "gpu")
def _hbm_clock_low(where: Where, ctx: Context, out: FaultOutput) -> None:
    # The memory clock is stuck in a lower P-state (2619 -> 1593 MHz on an H100) with no
    # throttle reason: memory-bound kernels (attention, norms, the optimizer) run slower.
    _persist(
        out,
        "gpu",
        _one(where.gpu_global),
        where,
        mem_clock=where.p("mem_clock_ratio", 0.61),
        compute=where.p("compute", 1.05),
    )


@fault("local_disk_slow", "implicit", "host")
def _local_disk_slow(where: Where, ctx: Context, out: FaultOutput) -> None:
    # A failing local NVMe (worn, thermally throttled, a bad PCIe link): the device is busy
    # almost all the time for a fraction of its usual throughput, and the data loader reading
    # its shards from it keeps the node's ranks waiting.
    _persist(
        out,
        "host",
        _one(where.node),
        where,
        disk_busy=where.p("busy", 0.9),
        disk_throughput=where.p("throughput_ratio", 0.15),
        psi_io=where.p("psi_io", 0.12),
        iowait=0.02,
        compute=where.p("compute", 1.12),
    )


# ---- drift: a part that was normal becomes what a quirky part always was (issue 17) ---------


def _drift(gpus: np.ndarray, where: Where, out: FaultOutput) -> None:
    """The GPUs lose a few % of clock, with no throttle reason and nothing logged: worn thermal
    interface material or a weakening fan lets them run ``temp_rise`` degrees hotter and GPU
    Boost holds a lower clock there, or (``temp_rise = 0``) a power-delivery part no longer
    sustains the boost clock. Nothing else changes (power follows the load), so the signature
    is the one a binned-low or hot-running healthy part has always had (``background``
    quirks): only the part's own history says it is new. The heat builds over ``rise_s`` and
    the clock drops half-way, as in ``thermal_throttle``."""
    t, heat, rise = where.onset_s, where.p("temp_rise", 5.0), where.p("rise_s", 60.0)
    clock = where.p("clock", 0.97)
    if rise > 0:
        out.episodes.append(Episode("gpu", gpus, t, t + rise, "temp", heat, ramp=True))
    out.episodes.append(Episode("gpu", gpus, t + rise, where.end_s, "temp", heat))
    slow = Where(**{**where.__dict__, "onset_s": t + rise / 2})
    _persist(out, "gpu", gpus, slow, clock=clock, compute=where.p("compute", 1 / clock))


@fault("gpu_clock_drift", "implicit", "gpu")
def _gpu_clock_drift(where: Where, ctx: Context, out: FaultOutput) -> None:
    _drift(_one(where.gpu_global), where, out)


@fault("node_clock_drift", "implicit", "node")
def _node_clock_drift(where: Where, ctx: Context, out: FaultOutput) -> None:
    # A chassis-level cause (a fan wall, an inlet): every GPU of the node drifts together.
    _drift(_node_gpus(where, ctx), where, out)


# ---- one GPU, two sources: the kernel log and NVML (issue 16: PCI id vs GPU index) -----------

KERNEL_XID_TEXT = {
    79: "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    48: "pid={pid}, name=python, An uncorrectable double bit error (DBE) has been detected on "
    "GPU in the framebuffer at partition 6, subpartition 0.",
    74: "pid={pid}, name=python, NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, "
    "0x0, 0x0, 0x0, 0x0)",
    13: "pid={pid}, name=python, Graphics SM Warp Exception on (GPC 1, TPC 2, SM 0): Out Of "
    "Range Address",
}
NVML_XID_TEXT = {
    79: "GPU has fallen off the bus",
    48: "DBE (double bit error)",
    74: "NVLink: fatal error detected",
    13: "Graphics engine exception",
}


CRASH_REASON = {
    79: "CUDA error: unspecified launch failure",
    48: "CUDA error: uncorrectable ECC error encountered",
    74: "NCCL error: unhandled system error (NVLink)",
}


@fault("xid_kmsg_and_nvml", "explicit", "gpu")
def _xid_kmsg_and_nvml(where: Where, ctx: Context, out: FaultOutput) -> None:
    code = int(where.p("code", 79))
    if code not in KERNEL_XID_TEXT:
        raise ValueError(f"xid_kmsg_and_nvml: code {code} is not one of {sorted(KERNEL_XID_TEXT)}")
    given = where.params.get("sources", ("kmsg", "nvml"))
    sources = (given,) if isinstance(given, str) else tuple(given)
    if not sources or set(sources) - {"kmsg", "nvml"}:
        raise ValueError(f"xid_kmsg_and_nvml: sources {sources!r}: name kmsg and/or nvml")
    gpu, t = _one(where.gpu_global), where.onset_s
    if code == 74:  # NVLink CRC errors build up before the fatal error
        t += where.p("ramp_s", 90.0)
        out.episodes += [
            Episode("gpu", gpu, where.onset_s, t, "nvlink_crc", 200.0, ramp=True),
            Episode("gpu", gpu, t, where.end_s, "nvlink_down", 2),
        ]
    if code == 48:
        out.episodes += [
            Episode("gpu", gpu, t, t + 1, "ecc_uncorrected", 1),
            Episode("gpu", gpu, t, where.end_s, "remap_pending", 1),
        ]
    # XID 13 is application class: it repeats on the one GPU and the job lives on.
    count = int(where.p("count", 4)) if code == 13 else 1
    for n in range(count):
        at = t + n * where.p("every_s", 120.0)
        if at >= where.end_s:
            break
        out.events += _two_source_xid(where, ctx, at, code, sources)
    if code == 79:
        out.episodes.append(Episode("gpu", gpu, t, where.end_s, "lost", 1))
        if "nvml" in sources:  # the agent's next NVML read answers GpuIsLost
            lost: dict[str, int | str] = {
                "gpu": where.gpu,
                "device": pci_bus_id(where.gpu),
                "message": "NVML: GPU is lost",
            }
            out.events.append(
                EventRecord(
                    ctx.start_ns + int((t + 1.0) * 1e9), where.node_name, "nvml", "gpu_lost", lost
                )
            )
    if code in CRASH_REASON:
        _crash(where, ctx, out, t, CRASH_REASON[code])


def _two_source_xid(
    where: Where, ctx: Context, at_s: float, code: int, sources: tuple[str, ...]
) -> list[EventRecord]:
    """The driver logs the XID to the kernel ring buffer first, naming the GPU by its PCI
    address only; NVML's event (with the index) reaches the agent's listener a moment later."""
    events = []
    if "kmsg" in sources:
        bus = kernel_bus_id(where.gpu)
        text = KERNEL_XID_TEXT[code].format(pid=4242 + where.gpu)
        message = f"NVRM: Xid (PCI:{bus}): {code}, {text}"
        events.append(
            EventRecord(
                ctx.start_ns + int(at_s * 1e9),
                where.node_name,
                "kmsg",
                "xid",
                {"code": code, "device": bus, "message": message},
            )
        )
    if "nvml" in sources:
        delay = where.p("nvml_delay_s", 0.2)
        events.append(_xid(where, ctx, at_s + delay, code, f"Xid {code}, {NVML_XID_TEXT[code]}"))
    return events


DESCRIPTIONS = {
    "xid48": "double-bit ECC error (XID 48) kills the rank; NCCL timeouts cascade",
    "xid94": "contained ECC error (XID 94) kills the rank; NCCL timeouts cascade",
    "xid95": "uncontained ECC error (XID 95) kills the rank; NCCL timeouts cascade",
    "row_remap_exhaustion": "correctable ECC rises, XID 63 (remap), then XID 64 (no spare rows)",
    "xid74": "NVLink CRC errors grow, then XID 74 and the job crashes",
    "nvlink_degradation": "NVLinks of one GPU go inactive with CRC errors; its comm slows",
    "pcie_downgrade": "PCIe link of one GPU trains down to x8; replays; its comm slows",
    "ib_flapping": "an IB port retrains repeatedly with symbol errors; its rank's comm slows",
    "ib_link_down": "an IB port goes down (explicit link_down); NCCL timeouts cascade",
    "pfc_storm": "one RoCE NIC floods PFC pauses; every port of the job stalls",
    "xid79": "GPU fell off the bus (XID 79, GPU lost); NCCL timeouts cascade",
    "xid119": "GSP RPC timeout (XID 119); the rank dies; NCCL timeouts cascade",
    "thermal_throttle": "one GPU's cooling fails: temperature rises, thermal throttling",
    "power_brake": "power brake on a node: all its GPUs clock down",
    "fail_slow_gpu": "a GPU's clock is stuck low with no throttle reason: its rank is slow",
    "host_contention": "CPU and memory contention on a host slow its ranks",
    "io_stall": "the dataloader stalls on IO on one node; its ranks compute slowly",
    "nccl_hang": "every rank stops; the cause node's ranks are stuck on the host, others time out",
    "sdc": "silent data corruption: a loss spike from one replica, then the whole job",
    "software_crash": "an application exception kills one rank; not hardware",
    "compound_benign": "small ECC, PCIe, throttle, symbol-error and CPU anomalies on one node "
    "that together slow the job",
    "pipeline_imbalance": "the last pipeline stage becomes heavier: slower job, no hardware fault",
    "seqlen_imbalance": "sequence lengths vary more: noisier, slower steps, no hardware fault",
    "ib_rate_degraded": "an IB port trains down (e.g. 400 -> 200 Gb/s); its rank's comm slows, "
    "its ring neighbour waits",
    "ib_link_flap": "an IB port drops for seconds and comes back, again and again; the ring stalls",
    "nic_speed_degraded": "a node's Ethernet link negotiates below its rated speed; its data "
    "loading slows",
    "power_cap": "a GPU's enforced power limit is set below its default: power-cap throttle, "
    "lower clocks",
    "hbm_clock_low": "a GPU's memory clock is stuck below its maximum; compute slows a few %",
    "local_disk_slow": "a node's local disk is busy at a fraction of its throughput; its data "
    "loading slows",
    "xid_kmsg_and_nvml": "one XID reported by the kernel log (PCI id only) and by NVML (GPU index)",
    "gpu_clock_drift": "a GPU that ran normally drifts a few % slower and a few degrees hotter, "
    "no throttle reason: like a binned-low part, but new",
    "node_clock_drift": "every GPU of a node drifts a few % slower and hotter (a chassis cooling "
    "cause), no throttle reason",
}
