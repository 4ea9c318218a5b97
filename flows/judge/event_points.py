"""Event points (XIDs, GPU lost, MCEs, link changes, a rank's exit) as explicit errors of a part.

A kernel-log XID names its GPU by bus id; it is mapped to NVML's index (``GpuIdentity``). What
only the training process reports through the hook is ``reported``: evidence on the part,
never an error of its own (any process on the node can write to the hook).
"""

from __future__ import annotations

from collections.abc import Mapping

from reflex_localize.flows.incidents.node_memory import REPEATS_THAT_MATTER, NodeMemory
from reflex_localize.flows.messages import CASCADE_KINDS, ExplicitEvent
from reflex_localize.flows.signals.gpu_identity import GpuIdentity
from reflex_localize.schemas.frame import Frame
from reflex_localize.schemas.hardware_profiles import generic_xids, load_profiles

_EVENT_COMPONENT = {
    "xid": "gpu",
    "gpu_lost": "gpu",
    "mce": "host",
    "oom_kill": "host",
    "link_down": "nic",
    "link_up": "nic",
    "nccl_timeout": "node",
    "process_exit": "node",
    "node_missing": "node",
}
_EVENT_SEVERITY = {
    "gpu_lost": "critical",
    "mce": "warning",  # corrected ("events logged"); an uncorrected one is raised below
    "link_down": "critical",
    "oom_kill": "application",
    "link_up": "info",
    "nccl_timeout": "cascade",
    "process_exit": "cascade",
    "node_missing": "critical",
}
_EVENT_ACTION = {
    "gpu_lost": "drain node; reseat or replace the GPU",
    "mce": "drain node; check CPU/DIMM from the MCE bank",
    "link_down": "check cable and switch port; replace the transceiver if it recurs",
    "oom_kill": "check the job's host memory use",
}


def explicit_events(
    frames: list[Frame],
    gpu_ids: GpuIdentity,
    memory: NodeMemory,
    node_profile: Mapping[str, str],
) -> list[ExplicitEvent]:
    """Each ``event`` point as an error of a part, classified by its node's hardware profile
    (an XID's meaning, severity and action); an XID the driver reported is noted in the
    part's memory (``memory``), where repeats of an application XID make it the GPU's."""
    events = []
    profiles = load_profiles()
    for frame in frames:
        for point in frame.points():
            node, kind = point.tags["node"], point.tags["kind"]
            code = int(point.fields.get("code", 0))
            gpu = point.fields.get("gpu")
            device = str(point.fields.get("device", "-") or "-")
            index = str(gpu) if gpu is not None else device
            component = _EVENT_COMPONENT.get(kind, "node")
            if component == "gpu" and gpu is None:
                # The kernel log names the GPU by bus id: the same GPU as NVML's index.
                index = gpu_ids.index(node, device) or index
            severity = _EVENT_SEVERITY.get(kind, "warning")
            meaning, action = kind.replace("_", " "), _EVENT_ACTION.get(kind, "")
            if kind == "xid":
                profile = profiles.get(node_profile.get(node, ""))
                info = profile.xid(code) if profile else generic_xids().get(code)
                if info is not None:
                    meaning, severity, action = info.meaning, info.severity, info.action
                else:
                    meaning, severity = f"XID {code}", "warning"
                # Only the driver's word (kernel log, NVML) goes on the GPU's record: the
                # hook's can be any process's, and would escalate an application XID.
                trusted = point.tags.get("source") != "training"
                seen = (
                    memory.note_xid(f"{node}|gpu|{index}", code, severity, point.time_ns)
                    if trusted
                    else 0
                )
                if severity == "application" and seen >= REPEATS_THAT_MATTER:
                    # Repeated on one GPU (in this job or across jobs): the GPU's doing.
                    severity = "warning"
                    meaning = f"{meaning}; {seen} faults on this GPU in days: suspect the GPU"
            message = str(point.fields.get("message", ""))
            if kind == "mce" and (
                "Machine Check Exception" in message
                or "Fatal" in message
                or "uncorrected" in message.lower()
            ):
                severity = "critical"
            if (
                point.tags.get("source") == "training"
                and kind not in CASCADE_KINDS
                and severity in ("critical", "warning")
            ):
                # Any process of a job can send this through the hook: the training
                # process's word is evidence on the part, never an error on its own.
                severity = "reported"
                meaning = f"{meaning} (reported by the training process)"
            if kind in ("nccl_timeout", "process_exit") and message:
                # the rank's last words (flows/incidents/exit_messages.py)
                meaning = message[:300]
            if component == "node" and kind not in ("nccl_timeout", "process_exit"):
                index = "-"
            if component in ("host", "node"):
                index = "-"
            events.append(
                ExplicitEvent(
                    point.time_ns,
                    node,
                    kind,
                    code,
                    component,
                    index,
                    severity,
                    meaning,
                    action,
                    str(point.fields.get("job", "")),
                    int(point.fields.get("rank", -1)),
                )
            )
    return events
