"""Which declared field feeds which signal, or why none does.

Every field of the telemetry measurements is accounted for: read by a derived signal
(:mod:`flows.signals`), used another way by the flow, or left unused for a stated reason. A
field added to the schema without an entry here fails ``tests/test_signal_audit.py``, and the
table in ``docs/signal-audit.md`` is this module's output
(``python -m reflex_localize.flows.signals.audit``).

>>> uses("ib_port", "rate_gbps")
'signal nic_rate_low'
"""

from __future__ import annotations

from reflex_localize.flows.signals.derive import SIGNALS
from reflex_localize.schemas.contract import load_schema

# Measurements that carry what the flow judges (Reflex's own outputs are not inputs).
AUDITED = (
    "gpu",
    "gpu_info",
    "gpu_nvlink",
    "host",
    "host_disk",
    "host_fs",
    "nic",
    "ib_port",
    "gpu_topology",
    "event",
    "train_step",
    "job_membership",
)

# Fields the flow uses other than as a derived signal.
OTHER_USES = {
    ("gpu", "sm_clock_max_mhz"): "the threshold baseline's clock rule (profile limit first)",
    ("gpu", "memory_total_bytes"): "denominator for dashboards; the flow does not judge it",
    ("gpu_info", "pci_bus_id"): "joins kernel-log XIDs (bus id) to the GPU index",
    ("gpu_info", "name"): "selects the hardware profile (the agent's profile tag)",
    ("gpu_topology", "pci_bus_id"): "joins kernel-log XIDs (bus id) to the GPU index",
    ("gpu_topology", "hca"): "the GPU's rail: a rank slow in communication blames this port",
    ("gpu_topology", "hca_port"): "the GPU's rail: a rank slow in communication blames this port",
    ("event", "code"): "XID or MCE number: severity and advice from the profile's XID table",
    ("event", "gpu"): "the GPU the event concerns (its entity)",
    ("event", "device"): "bus id, netdev or port: the entity when no GPU index is given",
    ("event", "job"): "routes training events to their job",
    ("event", "rank"): "which rank exited first (exit messages)",
    ("event", "message"): "MCE severity, the first rank's exit message",
    ("train_step", "step"): "per-step peer comparison",
    ("train_step", "step_time_seconds"): "regression and hang triggers",
    ("train_step", "compute_seconds"): "stragglers, stage and data patterns",
    ("train_step", "comm_seconds"): "communication stragglers (their rail's port)",
    ("train_step", "checkpoint_seconds"): "a marked checkpoint: a phase, never a fault",
    ("train_step", "loss"): "one replica's loss jumping alone: suspected silent data corruption",
    ("job_membership", "gpu"): "which GPU a rank's slowness blames",
    ("job_membership", "world_size"): "when a job's window is complete",
    ("job_membership", "dp_rank"): "data-parallel peers",
    ("job_membership", "pp_rank"): "stage peers",
    ("job_membership", "pp_size"): "stage patterns",
    ("job_membership", "profile"): "peers share a GPU model",
    ("job_membership", "active"): "when a job ends",
    ("job_membership", "cuda_visible_devices"): "which node GPU the rank's device index is",
    ("job_membership", "nvidia_visible_devices"): "which node GPUs the rank's container holds",
    ("gpu_info", "uuid"): "places a rank whose visible devices name its GPU by UUID",
}

# Fields no part of the flow reads, and why.
UNUSED = {
    ("gpu", "utilization_gpu_ratio"): "follows the workload, not the part's health",
    ("gpu", "utilization_memory_ratio"): "follows the workload",
    ("gpu", "memory_used_bytes"): "follows the workload (the job's memory, not a fault)",
    ("gpu", "temperature_slowdown_celsius"): "the profile's limit is used; equal by design",
    ("gpu", "ecc_corrected_aggregate_total"): "lifetime count; the volatile rate is judged",
    ("gpu", "ecc_uncorrected_aggregate_total"): "lifetime count; the volatile rate is judged",
    ("gpu", "retired_pages_sbe"): "pre-Ampere history; retired_pages_pending is judged",
    ("gpu", "retired_pages_dbe"): "pre-Ampere history; retired_pages_pending is judged",
    ("gpu", "remapped_rows_correctable"): "history of repairs done; pending and failure judged",
    ("gpu", "remapped_rows_uncorrectable"): "history of repairs done; pending and failure judged",
    ("gpu_info", "serial"): "identity for the RMA; not a health signal",
    ("gpu_info", "driver_version"): "fleet inventory; not a health signal",
    ("gpu_nvlink", "active"): "gpu.nvlink_active_links carries the same state per GPU",
    ("host", "cpu_busy_ratio"): "follows the workload; CPU pressure (PSI) is judged",
    ("host", "cpu_iowait_ratio"): "follows the workload; I/O pressure (PSI) is judged",
    ("host", "cpu_steal_ratio"): "bare metal has none; a VM's steal shows in CPU pressure",
    ("host", "load1"): "follows the workload; CPU pressure (PSI) is judged",
    ("host", "load5"): "follows the workload",
    ("host", "load15"): "follows the workload",
    ("host", "procs_running"): "follows the workload",
    ("host", "psi_memory_full_avg10_ratio"): "the 'some' share is judged; 'full' follows it",
    ("host", "psi_io_full_avg10_ratio"): "the 'some' share is judged; 'full' follows it",
    ("host_disk", "read_bytes"): "follows the workload; disk busy time is judged",
    ("host_disk", "written_bytes"): "follows the workload (checkpoints); busy time is judged",
    ("host_fs", "size_bytes"): "denominator of used_ratio, which the agent computes",
    ("host_fs", "available_bytes"): "the agent's used_ratio is judged",
    ("nic", "up"): "the IB port's state is judged; a netdev down shows there too",
    ("nic", "rx_bytes"): "follows the workload",
    ("nic", "tx_bytes"): "follows the workload",
    ("nic", "rx_packets"): "follows the workload",
    ("nic", "tx_packets"): "follows the workload",
    ("nic", "rx_dropped"): "kernels count benign drops (unknown protocols, VLANs) here",
    ("nic", "tx_dropped"): "kernels count benign drops here",
    ("ib_port", "phys_state"): "the logical state is judged; it follows the physical one",
    ("ib_port", "port_rcv_data_bytes"): "follows the workload",
    ("ib_port", "port_xmit_data_bytes"): "follows the workload",
    ("ib_port", "out_of_buffer"): "receive queues not refilled: the application's doing",
    ("ib_port", "np_cnp_sent"): "fabric congestion, job-wide; not one port's fault",
    ("ib_port", "rp_cnp_handled"): "fabric congestion, job-wide; not one port's fault",
    ("ib_port", "np_ecn_marked_roce_packets"): "fabric congestion, job-wide",
    ("gpu_topology", "path"): "shown in events; any path still names the nearest HCA",
    ("gpu_topology", "numa_node"): "inventory; not a health signal",
    ("train_step", "tokens_per_second"): "follows step time, which is judged",
    ("train_step", "data_seconds"): "shown in events; data waits show in the data pattern",
    ("train_step", "forward_seconds"): "shown in events; compute is judged as a whole",
    ("train_step", "backward_seconds"): "shown in events; compute is judged as a whole",
    ("train_step", "optimizer_seconds"): "shown in events; compute is judged as a whole",
    ("train_step", "section_timer"): "how compute was timed (GPU or CPU); one job, one timer",
    ("job_membership", "tp_rank"): "tensor parallelism stays inside a node",
}


def signals_reading(measurement: str, field_name: str) -> list[str]:
    return [
        d.name for d in SIGNALS.values() if d.measurement == measurement and field_name in d.fields
    ]


def uses(measurement: str, field_name: str) -> str:
    """What the flow does with one field: its signals, another use, or why it is unused."""
    signals = signals_reading(measurement, field_name)
    if signals:
        return "signal " + ", ".join(signals)
    key = (measurement, field_name)
    if key in OTHER_USES:
        return "used: " + OTHER_USES[key]
    if key in UNUSED:
        return "unused: " + UNUSED[key]
    raise KeyError(f"{measurement}.{field_name}: no signal, use or reason (flows/signals/audit.py)")


def table() -> str:
    """``docs/signal-audit.md``'s table: every audited field and what reads it."""
    schema = load_schema()
    lines = ["| measurement | field | read by |", "|---|---|---|"]
    for name in AUDITED:
        for field_name in schema.measurements[name].fields:
            lines.append(f"| `{name}` | `{field_name}` | {uses(name, field_name)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
