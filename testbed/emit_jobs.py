"""What the training hook sends: ``train_step`` per rank and step, ``job_membership`` at
launch and every minute, and the training side's events when a job hangs or crashes."""

from __future__ import annotations

import numpy as np

from testbed import lp
from testbed.faults import NCCL_TIMEOUT_S
from testbed.model import Fleet
from testbed.timeline import RANKS_PER_NODE, Steps, layout

MEMBERSHIP_EVERY_S = 60.0


def _ns(fleet: Fleet, node: int, t: float) -> int:
    return fleet.start_ns + round((t + fleet.nodes[node].skew_s) * 1e9)


def step_rows(fleet: Fleet, s: Steps, t0: float, t1: float, rng: np.random.Generator,
              out: list[tuple[int, str]]) -> None:  # fmt: skip
    job = s.job
    world = s.ranks
    lo, hi = np.searchsorted(s.end, t0), np.searchsorted(s.end, t1)
    heads = [
        lp.head(
            "train_step",
            {
                "cluster": fleet.cluster,
                "job": job.name,
                "node": fleet.nodes[s.seg.nodes[r // RANKS_PER_NODE]].name,
                "rank": str(r),
            },
        )
        for r in range(world)
    ]
    last_stage = [layout(job, r, world)[1] == job.pp - 1 for r in range(world)]
    dp = world // (job.tp * job.pp)
    for i in range(lo, hi):
        end, number = float(s.end[i]), int(s.number[i])
        step = end - float(s.start[i])
        ckpt = float(s.ckpt[i])
        jitter = rng.uniform(0.0, 0.03, world)
        for r in range(world):
            node = s.seg.nodes[r // RANKS_PER_NODE]
            st = _ns(fleet, node, end + jitter[r])
            t_r = step + rng.normal(0, 0.002)
            tokens = job.tokens_per_step / dp / t_r
            fields = f"step={number}i,step_time_seconds={t_r:.4f},tokens_per_second={tokens:.1f}"
            if last_stage[r]:
                fields += f",loss={float(s.loss[i]) + rng.normal(0, 0.004):.4f}"
            if job.split:
                c, d, o = float(s.compute[i, r]), float(s.data[i, r]), float(s.opt[i, r])
                fields += f",compute_seconds={c + o:.4f},comm_seconds={float(s.comm[i, r]):.4f}"
                if job.sections:
                    fields += f",data_seconds={d:.4f},forward_seconds={c * 0.34:.4f}"
                    fields += f",backward_seconds={c * 0.66:.4f},optimizer_seconds={o:.4f}"
                if ckpt and job.ckpt_marked:
                    fields += f",checkpoint_seconds={ckpt:.3f}"
            out.append((st, f"{heads[r]} {fields} {st}"))


def membership_rows(fleet: Fleet, s: Steps, t0: float, t1: float,
                    out: list[tuple[int, str]]) -> None:  # fmt: skip
    job, seg = s.job, s.seg
    world = s.ranks
    first = seg.start_s + 5.0
    times = [t for t in np.arange(first, seg.end_s, MEMBERSHIP_EVERY_S) if t0 <= t < t1]
    final = seg.end_s + 5.0 if seg.end_s < fleet.duration_s else None
    if final is not None and t0 <= final < t1:
        times.append(final)
    for t in times:
        active = "false" if final is not None and t == final else "true"
        for r in range(world):
            node = seg.nodes[r // RANKS_PER_NODE]
            dp, pp, tp = layout(job, r, world)
            fields = (f"world_size={world}i,active={active},dp_rank={dp}i,pp_rank={pp}i"
                      f",tp_rank={tp}i,pp_size={job.pp}i,gpu={r % RANKS_PER_NODE}i")  # fmt: skip
            if fleet.name != "aisle_hdr":  # that site's hook runs without the profile
                fields += f",profile={lp.string(fleet.nodes[node].model.profile)}"
            if fleet.name == "hgx_ndr":
                fields += ',cuda_visible_devices="0,1,2,3,4,5,6,7"'
            head = lp.head(
                "job_membership",
                {
                    "cluster": fleet.cluster,
                    "job": job.name,
                    "node": fleet.nodes[node].name,
                    "rank": str(r),
                },
            )
            st = _ns(fleet, node, t + r * 1e-4)
            out.append((st, f"{head} {fields} {st}"))


def crash_rows(fleet: Fleet, s: Steps, t0: float, t1: float,
               out: list[tuple[int, str]]) -> None:  # fmt: skip
    """A hang ends in NCCL watchdog timeouts on every rank; a crash in process exits."""
    seg, job = s.seg, s.job
    if seg.hang_at_s is None or seg.crash_node is None:
        return
    hung = seg.end_s - seg.hang_at_s >= NCCL_TIMEOUT_S - 1
    fault = next(f for f in fleet.faults if f.node == seg.crash_node
                 and abs(f.start_s - seg.hang_at_s) < 1e-6)  # fmt: skip
    bad_rank = seg.nodes.index(seg.crash_node) * RANKS_PER_NODE + int(fault.index)
    for r in range(s.ranks):
        node = seg.nodes[r // RANKS_PER_NODE]
        name = fleet.nodes[node].name
        if r == bad_rank:
            t = seg.hang_at_s + 2.0
            msg = ("CUDA error: unspecified launch failure" if hung
                   else "CUDA error: uncorrectable ECC error encountered")  # fmt: skip
            code = 1
            kind = "process_exit"
        elif hung:
            t = seg.end_s - 2.0 + r * 1e-3
            msg = (f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL("
                   f"OpType=ALLREDUCE, NumelIn=1048576, Timeout(ms)=600000) ran for 600012 "
                   f"milliseconds before timing out.")  # fmt: skip
            code, kind = 0, "nccl_timeout"
        else:
            t = seg.end_s - 1.0 + r * 1e-3
            msg = "NCCL error: remote process exited or there was a network error"
            code, kind = 1, "process_exit"
        if not t0 <= t < t1:
            continue
        head = lp.head("event", {"cluster": fleet.cluster, "node": name, "kind": kind,
                                 "source": "training"})  # fmt: skip
        st = _ns(fleet, node, t)
        code_f = f",code={code}i" if kind == "process_exit" else ""
        out.append((st, f"{head} job={lp.string(job.name)},rank={r}i,message={lp.string(msg)}"
                        f"{code_f} {st}"))  # fmt: skip
