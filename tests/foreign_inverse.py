"""A simulated run written out as a cluster without Reflex's agent would store it: GPUs as
Telegraf ``nvidia_smi`` or dcgm-exporter, InfiniBand ports as Telegraf ``infiniband``, and only
what Reflex's training hook writes in Reflex's own names (steps, membership, the ranks' exits).

The foreign names, units and shapes are those of the tables in ``schemas/foreign/`` (each cites
its source); the values are the inverse of their conversions, rounded as the foreign tool writes
them (Telegraf's nvidia_smi writes integers except power, Prometheus writes floats). What the
foreign tools cannot see is left out: host, NIC and NVLink telemetry of the agent, kernel and
NVML events, a throttle's HW-slowdown bit (no counter in Telegraf).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from reflex_localize.schemas.codec import Point, encode, escape_key, format_value
from reflex_localize.schemas.frame import Frame
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.simulator import Simulation, load_scenario

GPU_NAME = "NVIDIA H100 80GB HBM3"  # the marketing name nvidia-smi and DCGM report
# Reflex field -> (Telegraf nvidia_smi field, scale to undo), from telegraf_nvidia_smi.csv.
NVIDIA_SMI = {
    "temperature_celsius": ("temperature_gpu", 1),
    "memory_temperature_celsius": ("temperature_memory", 1),
    "utilization_gpu_ratio": ("utilization_gpu", 0.01),
    "utilization_memory_ratio": ("utilization_memory", 0.01),
    "memory_used_bytes": ("memory_used", 1048576),
    "memory_total_bytes": ("memory_total", 1048576),
    "sm_clock_mhz": ("clocks_current_sm", 1),
    "memory_clock_mhz": ("clocks_current_memory", 1),
    "power_watts": ("power_draw", 1),
    "power_limit_watts": ("power_limit", 1),
    "pcie_link_gen": ("pcie_link_gen_current", 1),
    "pcie_link_width": ("pcie_link_width_current", 1),
    "ecc_corrected_volatile": ("ecc_errors_volatile_dram_correctable", 1),
    "ecc_uncorrected_volatile": ("ecc_errors_volatile_dram_uncorrectable", 1),
    "remapped_rows_correctable": ("remapped_rows_correctable", 1),
    "remapped_rows_uncorrectable": ("remapped_rows_uncorrectable", 1),
}
# Throttle-time counters (microseconds) of Telegraf's schema_v13, by the bit they stand for.
THROTTLE_COUNTERS = {
    0x4: "clocks_event_reasons_counters_sw_power_cap",
    0x20: "clocks_event_reasons_counters_sw_therm_slowdown",
    0x40: "clocks_event_reasons_counters_hw_therm_slowdown",
    0x80: "clocks_event_reasons_counters_hw_power_brake",
}
# Reflex field -> (dcgm-exporter metric, scale to undo): its default counters.
DCGM = {
    "sm_clock_mhz": ("DCGM_FI_DEV_SM_CLOCK", 1),
    "memory_clock_mhz": ("DCGM_FI_DEV_MEM_CLOCK", 1),
    "memory_temperature_celsius": ("DCGM_FI_DEV_MEMORY_TEMP", 1),
    "temperature_celsius": ("DCGM_FI_DEV_GPU_TEMP", 1),
    "power_watts": ("DCGM_FI_DEV_POWER_USAGE", 1),
    "pcie_replay_errors": ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 1),
    "utilization_gpu_ratio": ("DCGM_FI_DEV_GPU_UTIL", 0.01),
    "utilization_memory_ratio": ("DCGM_FI_DEV_MEM_COPY_UTIL", 0.01),
    "memory_used_bytes": ("DCGM_FI_DEV_FB_USED", 1048576),
    "remapped_rows_correctable": ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", 1),
    "remapped_rows_uncorrectable": ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 1),
}
IB_SCALE = {
    "port_rcv_data_bytes": ("port_rcv_data", 4),
    "port_xmit_data_bytes": ("port_xmit_data", 4),
}
IB_FIELDS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
             "port_xmit_discards", "port_xmit_wait", "local_link_integrity_errors",
             "out_of_buffer")  # fmt: skip
HOOK_MEASUREMENTS = ("train_step", "job_membership")
# Reflex field -> Telegraf field, from telegraf_net.csv and telegraf_diskio.csv (both scale 1,
# but for io_time: Telegraf counts milliseconds).
NET = {"tx_bytes": "bytes_sent", "rx_bytes": "bytes_recv", "tx_packets": "packets_sent",
       "rx_packets": "packets_recv", "rx_errors": "err_in", "tx_errors": "err_out",
       "rx_dropped": "drop_in", "tx_dropped": "drop_out"}  # fmt: skip
DISKIO = {"read_bytes": "read_bytes", "written_bytes": "write_bytes"}
# Reflex field -> node_exporter metric (node_exporter.csv); its counters are floats.
NODE_PRESSURE = {
    "psi_cpu_some_avg10_ratio": "node_pressure_cpu_waiting_seconds_total",
    "psi_memory_some_avg10_ratio": "node_pressure_memory_waiting_seconds_total",
    "psi_memory_full_avg10_ratio": "node_pressure_memory_stalled_seconds_total",
    "psi_io_some_avg10_ratio": "node_pressure_io_waiting_seconds_total",
    "psi_io_full_avg10_ratio": "node_pressure_io_stalled_seconds_total",
}
NODE_NETWORK = {
    "tx_bytes": "node_network_transmit_bytes_total",
    "rx_bytes": "node_network_receive_bytes_total",
    "tx_packets": "node_network_transmit_packets_total",
    "rx_packets": "node_network_receive_packets_total",
    "tx_errors": "node_network_transmit_errs_total",
    "rx_errors": "node_network_receive_errs_total",
    "tx_dropped": "node_network_transmit_drop_total",
    "rx_dropped": "node_network_receive_drop_total",
}
NODE_DISK = {"read_bytes": "node_disk_read_bytes_total",
             "written_bytes": "node_disk_written_bytes_total",
             "io_time_seconds": "node_disk_io_time_seconds_total"}  # fmt: skip
# Reflex field -> the tags of Telegraf's pressure point that carries it as avg10 (percent), from
# telegraf_pressure.csv.
PRESSURE = {
    "psi_cpu_some_avg10_ratio": {"resource": "cpu", "type": "some"},
    "psi_memory_some_avg10_ratio": {"resource": "memory", "type": "some"},
    "psi_memory_full_avg10_ratio": {"resource": "memory", "type": "full"},
    "psi_io_some_avg10_ratio": {"resource": "io", "type": "some"},
    "psi_io_full_avg10_ratio": {"resource": "io", "type": "full"},
}


def line(measurement: str, tags: Mapping[str, str], fields: Mapping, time_ns: int) -> str:
    """A foreign line, written as Telegraf writes it (tags sorted, escaped)."""
    head = measurement + "".join(
        f",{escape_key(k)}={escape_key(v)}" for k, v in sorted(tags.items())
    )
    body = ",".join(f"{escape_key(k)}={format_value(v)}" for k, v in fields.items())
    return f"{head} {body} {time_ns}"


class ForeignWriter:
    """Writes one simulated run's frames in the foreign shapes; ``gpu`` is "telegraf",
    "dcgm_v1" (one measurement per metric, field gauge/counter) or "dcgm_v2" (measurement
    prometheus, the metrics as fields). ``site`` adds a rack tag to every foreign line;
    ``host`` writes the host NICs, disks and pressure stall as Telegraf's net, diskio and
    pressure, or (``host_source`` "node_exporter") as node_exporter's counters."""

    def __init__(
        self, gpu: str, site: bool = False, host: bool = False, host_source: str = "telegraf"
    ) -> None:
        self.gpu, self.site, self.host, self.host_source = gpu, site, host, host_source
        self.stalled_s: dict[tuple[str, str], float] = {}  # node_exporter's PSI counters
        self.last_host_ns: dict[str, int] = {}
        self.throttle_us: dict[tuple[str, str, int], int] = {}
        self.last_xid: dict[tuple[str, str], int] = {}

    def lines(self, frames: list[Frame]) -> Iterator[str]:
        for frame in frames:
            if frame.measurement in HOOK_MEASUREMENTS:
                yield from encode_frame(frame)
            elif frame.measurement == "event":
                yield from self._events(frame)
            elif frame.measurement == "gpu":
                for point in frame.points():
                    yield from self._gpu(point)
            elif frame.measurement == "ib_port":
                yield from (self._ib(point) for point in frame.points())
            elif frame.measurement in ("nic", "host_disk", "host") and self.host:
                for point in frame.points():
                    if self.host_source == "node_exporter":
                        yield from self._node_exporter(point)
                    elif point.measurement == "host":
                        yield from self._pressure(point)
                    else:
                        yield self._host_counters(point)

    def _host_tags(self, node: str) -> dict[str, str]:
        tags = {"host": node}
        if self.site:
            tags["rack"] = f"rack-{int(node.rsplit('-', 1)[1]) // 4}"
        return tags

    def _events(self, frame: Frame) -> Iterator[str]:
        for point in frame.points():
            if point.tags["source"] == "training":  # the hook's: the rank's own last words
                yield encode(point)
            elif point.tags["kind"] == "xid" and self.gpu.startswith("dcgm"):
                key = (point.tags["node"], str(point.fields["gpu"]))
                self.last_xid[key] = int(point.fields["code"])  # scraped at once, as if
                yield from self._dcgm(point.tags["node"], key[1], {"DCGM_FI_DEV_XID_ERRORS":
                                      float(point.fields["code"])}, point.time_ns)  # fmt: skip

    def _gpu(self, point: Point) -> Iterator[str]:
        node, gpu = point.tags["node"], point.tags["gpu"]
        if self.gpu == "telegraf":
            fields: dict = {}
            for name, (foreign, scale) in NVIDIA_SMI.items():
                if name in point.fields:
                    value = float(point.fields[name]) / scale
                    fields[foreign] = (
                        round(value, 2) if foreign.startswith("power") else round(value)
                    )
            reasons = int(point.fields.get("clocks_event_reasons", 0))
            for bit, counter in THROTTLE_COUNTERS.items():
                key = (node, gpu, bit)
                self.throttle_us[key] = self.throttle_us.get(key, 0) + (
                    1_000_000 if reasons & bit else 0
                )
                fields[counter] = self.throttle_us[key]
            fields["fan_speed"] = 40  # known to the table, no Reflex field: ignored and counted
            tags = self._host_tags(node) | {"index": gpu, "name": GPU_NAME, "pstate": "P0"}
            yield line("nvidia_smi", tags, fields, point.time_ns)
            return
        metrics = {foreign: float(point.fields[name]) / scale
                   for name, (foreign, scale) in DCGM.items() if name in point.fields}  # fmt: skip
        metrics["DCGM_FI_DEV_XID_ERRORS"] = float(self.last_xid.get((node, gpu), 0))
        metrics["DCGM_FI_DEV_FB_FREE"] = 1000.0
        yield from self._dcgm(node, gpu, metrics, point.time_ns)

    def _dcgm(self, node: str, gpu: str, metrics: dict[str, float], time_ns: int) -> Iterator[str]:
        labels = {"gpu": gpu, "UUID": f"GPU-{node}-{gpu}", "device": f"nvidia{gpu}",
                  "modelName": GPU_NAME, "Hostname": node}  # fmt: skip
        if self.site:
            labels["rack"] = self._host_tags(node)["rack"]
        if self.gpu == "dcgm_v2":
            yield line("prometheus", labels | {"url": "http://localhost:9400/metrics"},
                       metrics, time_ns)  # fmt: skip
            return
        for metric, value in metrics.items():
            kind = "counter" if metric.endswith("COUNTER") else "gauge"
            yield line(metric, labels, {kind: value}, time_ns)

    def _ib(self, point: Point) -> str:
        fields = {name: int(point.fields[name]) for name in IB_FIELDS if name in point.fields}
        for name, (foreign, scale) in IB_SCALE.items():
            if name in point.fields:
                fields[foreign] = int(point.fields[name]) // scale
        fields["VL15_dropped"] = 0  # known to the table, no Reflex field
        tags = self._host_tags(point.tags["node"]) | {"device": point.tags["hca"],
                                                       "port": point.tags["port"]}  # fmt: skip
        return line("infiniband", tags, fields, point.time_ns)

    def _pressure(self, point: Point) -> Iterator[str]:
        """One pressure point per resource and type, avg10 in percent rounded as the kernel
        prints it (two decimals); the longer averages as if steady."""
        for name, picked in PRESSURE.items():
            if name in point.fields:
                percent = round(float(point.fields[name]) * 100, 2)
                fields = {"avg10": percent, "avg60": percent, "avg300": percent}
                tags = self._host_tags(point.tags["node"]) | picked
                yield line("pressure", tags, fields, point.time_ns)

    def _node_exporter(self, point: Point) -> Iterator[str]:
        """node_exporter's counters, as Telegraf's inputs.prometheus (metric_version = 1) on each
        node writes them: scraping localhost, its host tag the node. Pressure is a counter of
        stall seconds: each avg10 share times the time since the node's previous sample."""
        tags = self._host_tags(point.tags["node"]) | {"instance": "localhost:9100"}
        if point.measurement == "host":
            node = point.tags["node"]
            since = point.time_ns - self.last_host_ns.get(node, point.time_ns)
            self.last_host_ns[node] = point.time_ns
            for name, metric in NODE_PRESSURE.items():
                if name in point.fields:
                    key = (node, metric)
                    self.stalled_s[key] = (
                        self.stalled_s.get(key, 0.0) + float(point.fields[name]) * since / 1e9
                    )
                    yield line(metric, tags, {"counter": self.stalled_s[key]}, point.time_ns)
            return
        metrics = NODE_NETWORK if point.measurement == "nic" else NODE_DISK
        tags = tags | {"device": point.tags["device"]}
        for name, metric in metrics.items():
            if name in point.fields:
                yield line(metric, tags, {"counter": float(point.fields[name])}, point.time_ns)

    def _host_counters(self, point: Point) -> str:
        tags = self._host_tags(point.tags["node"])
        if point.measurement == "nic":
            fields = {foreign: int(point.fields[name]) for name, foreign in NET.items()
                      if name in point.fields}  # fmt: skip
            fields["speed"] = -1  # what a driver that does not say gives: ignored
            return line("net", tags | {"interface": point.tags["device"]}, fields, point.time_ns)
        fields = {foreign: int(point.fields[name]) for name, foreign in DISKIO.items()
                  if name in point.fields}  # fmt: skip
        fields["io_time"] = round(float(point.fields["io_time_seconds"]) * 1000)
        fields["writes"] = 0  # known to the table, no Reflex field
        return line("diskio", tags | {"name": point.tags["device"]}, fields, point.time_ns)


def foreign_replay(
    scenario: str,
    seconds: int,
    gpu: str,
    seed: int = 7,
    site: bool = False,
    host: bool = False,
    host_source: str = "telegraf",
) -> list[str]:
    """The first ``seconds`` of a simulated scenario as foreign lines (and the hook's)."""
    writer = ForeignWriter(gpu, site, host, host_source)
    out: list[str] = []
    for number, chunk in enumerate(
        Simulation(load_scenario(scenario), seed=seed).chunks(seconds=10)
    ):
        if number * 10 >= seconds:
            break
        out += writer.lines(chunk)
    return out


def reflex_lines(scenario: str, seconds: int, seed: int = 7) -> list[str]:
    out: list[str] = []
    for number, chunk in enumerate(
        Simulation(load_scenario(scenario), seed=seed).chunks(seconds=10)
    ):
        if number * 10 >= seconds:
            break
        for frame in chunk:
            out += encode_frame(frame)
    return out
