"""GPU and NIC errors: ECC, row remapping, XIDs, PCIe, NVLink and InfiniBand counters."""

from __future__ import annotations

import json

from reflex_localize.dashboards.flux_parts import (
    bucket_constants,
    cluster_variable,
    events_annotation,
    pipe,
    select,
)
from reflex_localize.dashboards.grafana_model import TELEMETRY, Json, dashboard, panel, row, target

# Throttle reasons that mean trouble (schema: gpu.clocks_event_reasons):
# 0x8 HW slowdown | 0x20 SW thermal | 0x40 HW thermal | 0x80 power brake.
TROUBLE_THROTTLE_MASK = 0x8 | 0x20 | 0x40 | 0x80


def _growth(
    measurement: str,
    fields: list[str],
    title: str,
    help_text: str,
    by: tuple[str, ...],
) -> Json:
    """A counter's growth per interval, summed over the fields per ``by`` (resets are not
    growth). The max per window is computed in storage, so a fleet's worth of series stays
    cheap; summing per node or GPU keeps the panel readable."""
    flux = pipe(
        select(TELEMETRY, measurement, fields),
        "aggregateWindow(every: v.windowPeriod, fn: max, createEmpty: false)",
        "difference(nonNegative: true)",
        f"group(columns: {json.dumps(list(by))})",
        "aggregateWindow(every: v.windowPeriod, fn: sum, createEmpty: false)",
    )
    return panel(
        "timeseries",
        title,
        [target(flux)],
        steps=((1.0, "red"),),
        display_name=" ".join(
            f"${{__field.labels.{tag}}}" if tag == "node" else f"{tag} ${{__field.labels.{tag}}}"
            for tag in by
        ),
        description=help_text,
        options={"legend": {"displayMode": "table", "placement": "right", "calcs": ["sum"]}},
        size=(12, 8),
    )


def _latest_table(
    measurement: str, fields: list[str], title: str, sort: str, help_text: str
) -> Json:
    flux = pipe(
        select(TELEMETRY, measurement, fields),
        "last()",
        'pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")',
        "group()",
        'drop(columns: ["_start", "_stop", "_measurement", "cluster"])',
        f'sort(columns: ["{sort}"], desc: true)',
    )
    return panel("table", title, [target(flux)], description=help_text, size=(12, 8))


def _xids() -> Json:
    flux = pipe(
        select(TELEMETRY, "event", ["code", "gpu", "message"], 'r.kind == "xid"'),
        'pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")',
        "group()",
        'keep(columns: ["_time", "node", "gpu", "code", "message"])',
        'sort(columns: ["_time"], desc: true)',
    )
    return panel(
        "table",
        "XIDs",
        [target(flux)],
        steps=((48.0, "red"),),
        description="Every XID logged in the range, newest first (schemas/hardware/nvidia-xid).",
        rename={"_time": "time", "code": "xid"},
        size=(12, 8),
    )


def _throttling() -> Json:
    flux = pipe(
        select(TELEMETRY, "gpu", ["clocks_event_reasons"]),
        f"map(fn: (r) => ({{r with _value: "
        f"if bitwise.sand(a: r._value, b: {TROUBLE_THROTTLE_MASK}) != 0 then 1 else 0}}))",
        "aggregateWindow(every: v.windowPeriod, fn: sum, createEmpty: false)",
    )
    return panel(
        "timeseries",
        "Clock throttling for thermal, power or hardware reasons (samples)",
        [target(flux.replace("from(", 'import "experimental/bitwise"\n\nfrom(', 1))],
        display_name="${__field.labels.node} gpu ${__field.labels.gpu}",
        description="Samples per interval whose clocks_event_reasons has 0x8, 0x20, 0x40 or "
        "0x80 set.",
        size=(12, 8),
    )


def build() -> Json:
    gpu, port = ("node", "gpu"), ("node", "hca", "port")
    panels = [
        row("GPU memory"),
        _growth(
            "gpu",
            ["ecc_uncorrected_volatile"],
            "Uncorrected ECC errors",
            "Growth of uncorrected ECC errors per interval: any is a reason to drain.",
            gpu,
        ),
        _growth(
            "gpu",
            ["ecc_corrected_volatile"],
            "Corrected ECC errors",
            "Growth of corrected ECC errors per interval: benign alone, evidence in bulk.",
            gpu,
        ),
        _latest_table(
            "gpu",
            [
                "remapped_rows_correctable",
                "remapped_rows_uncorrectable",
                "remapped_rows_pending",
                "remapped_rows_failure",
            ],
            "Row remapping (latest per GPU)",
            "remapped_rows_uncorrectable",
            "Remapped rows; pending needs a GPU reset, failure means no spare rows are left.",
        ),
        _xids(),
        row("PCIe and NVLink"),
        _growth(
            "gpu",
            ["pcie_replay_errors"],
            "PCIe replays",
            "Growth of the PCIe replay counter per interval.",
            gpu,
        ),
        _latest_table(
            "gpu",
            ["pcie_link_gen", "pcie_link_gen_max", "pcie_link_width", "pcie_link_width_max"],
            "PCIe link against its maximum (latest per GPU)",
            "pcie_link_width_max",
            "A link below its maximum generation or width is degraded.",
        ),
        _growth(
            "gpu_nvlink",
            ["crc_flit_errors", "crc_data_errors"],
            "NVLink CRC errors",
            "Growth of NVLink flit and data CRC errors per interval.",
            gpu,
        ),
        _growth(
            "gpu_nvlink",
            ["replay_errors", "recovery_errors"],
            "NVLink replays and recoveries",
            "Growth of NVLink replays and link recoveries per interval.",
            gpu,
        ),
        _throttling(),
        row("InfiniBand and RoCE"),
        _growth(
            "ib_port",
            ["symbol_error"],
            "Symbol errors",
            "Minor link errors per interval; a port whose count keeps growing has a bad cable "
            "or transceiver.",
            port,
        ),
        _growth(
            "ib_port",
            ["link_error_recovery", "link_downed"],
            "Link recoveries and downs",
            "Retrains and downs per interval: a flapping link.",
            port,
        ),
        _growth(
            "ib_port",
            ["port_rcv_errors", "port_xmit_discards"],
            "Receive errors and discards",
            "Bad packets received and packets discarded on send, per interval.",
            port,
        ),
        _latest_table(
            "ib_port",
            ["state", "phys_state", "rate_gbps"],
            "Port state (latest; 4 = ACTIVE, phys 5 = LinkUp)",
            "rate_gbps",
            "Port state, physical state and rate per port.",
        ),
    ]
    return dashboard(
        "reflex-errors",
        "Reflex / GPU and NIC errors",
        panels,
        [*bucket_constants(), cluster_variable()],
        [events_annotation()],
        description="Hardware error counters of the cluster: ECC, remaps, XIDs, PCIe, NVLink, IB.",
    )
