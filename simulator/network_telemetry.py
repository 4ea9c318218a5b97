"""Network telemetry as sysfs shows it: one ``ib_port`` per HCA (mlx5_N port 1, one per GPU)
and the node's ethernet ``nic``. RoCE ports also carry the PFC, ECN and CNP counters that
InfiniBand ports do not have, so the two link layers are separate frames.

>>> from reflex_localize.simulator.scenario import load_scenario
>>> from reflex_localize.simulator.cluster import build_cluster
>>> net = NetworkTelemetry(build_cluster(load_scenario("demo")), seed=0)
>>> net.ports
256
"""

from __future__ import annotations

import numpy as np

from reflex_localize.schemas.frame import Frame
from reflex_localize.simulator.cluster import IB_RATE_GBPS, ClusterSpec
from reflex_localize.simulator.effects import BlockState
from reflex_localize.simulator.telemetry import BlockInput, Counters, frame, noise, tag

PORT_ACTIVE, PORT_DOWN = 4, 1
PHYS_LINK_UP, PHYS_POLLING = 5, 2
NIC_SPEED_MBPS = 25000
LINE_EFFICIENCY = 0.94  # TCP payload over Ethernet line rate


class NetworkTelemetry:
    def __init__(self, cluster: ClusterSpec, seed: int) -> None:
        rng = np.random.default_rng([seed, 202])
        gpus = cluster.gpus_per_node
        self.ports = cluster.gpu_count
        nodes = cluster.nodes
        node_of_port = np.repeat(np.arange(len(nodes)), gpus)
        profiles = cluster.profiles()
        self.rate_gbps = np.repeat([IB_RATE_GBPS[p.architecture] for p in profiles], gpus)
        self.roce = np.repeat([n.link_layer == "Ethernet" for n in nodes], gpus)
        self.port_tags = {
            "cluster": tag([cluster.name] * self.ports),
            "node": tag([nodes[n].name for n in node_of_port]),
            # Each GPU's rail, by the name its node gives it (cluster.NodeSpec.hcas).
            "hca": tag([nodes[n].hcas[i % gpus] for i, n in enumerate(node_of_port)]),
            "port": tag(["1"] * self.ports),
            "link_layer": tag([nodes[n].link_layer for n in node_of_port]),
        }
        self.nic_tags = {
            "cluster": tag([cluster.name] * len(nodes)),
            "node": tag([n.name for n in nodes]),
            "device": tag(["eth0"] * len(nodes)),
        }
        self.node_count = len(nodes)
        self.counters = Counters()
        # Counters were running long before the simulation started.
        self.bytes_start = rng.integers(1 << 40, 1 << 44, (4, self.ports))
        self.nic_start = rng.integers(1 << 30, 1 << 38, (2, len(nodes)))

    def frames(self, block: BlockInput) -> list[Frame]:
        fields = self._port_fields(block)
        frames = []
        for roce in (False, True):
            columns = self.roce == roce
            if not columns.any():
                continue
            names = list(IB_FIELDS) + (list(ROCE_FIELDS) if roce else [])
            tags = {name: values[columns] for name, values in self.port_tags.items()}
            sliced = {name: fields[name][:, columns] for name in names}
            frames.append(frame("ib_port", block, tags, sliced))
        frames.append(frame("nic", block, self.nic_tags, self._nic_fields(block)))
        return frames

    def _port_fields(self, block: BlockInput) -> dict[str, np.ndarray]:
        rng, state, shape = block.rng, block.port, (block.seconds, self.ports)
        up = state.array("port_state") >= PORT_ACTIVE
        # A slow port moves the same bytes over a longer step: fewer bytes per second.
        traffic = block.traffic * up / state.array("comm")
        line_bytes = self.rate_gbps / 8 * 1e9
        data = traffic * line_bytes * 0.45 * (1 + noise(rng, shape, 0.03))
        wait = (traffic * 2e5 + state.array("xmit_wait")) * (1 + np.abs(noise(rng, shape, 0.2)))
        congestion = state.array("xmit_wait") / 4e7 + traffic * 0.002
        add = self.counters.add
        symbol = add("symbol", 2e-5 + state.array("symbol_error"), rng)
        return {
            "state": np.where(up, PORT_ACTIVE, PORT_DOWN).astype(np.int64),
            "phys_state": np.where(up, PHYS_LINK_UP, PHYS_POLLING).astype(np.int64),
            "rate_gbps": self._rate(state, shape),
            "symbol_error": symbol,
            "link_error_recovery": add("recovery", state.array("recovery"), rng, poisson=False),
            "link_downed": add("downed", state.array("downed"), rng, poisson=False),
            "port_rcv_errors": add("rcv_err", 1e-6 + state.array("rcv_error"), rng),
            "port_xmit_discards": add("discard", 1e-6 + 5.0 * ~up, rng),
            "port_xmit_wait": add("wait", wait, rng, poisson=False),
            "port_rcv_data_bytes": add("rx", data, rng, poisson=False, start=self.bytes_start[0]),
            "port_xmit_data_bytes": add("tx", data, rng, poisson=False, start=self.bytes_start[1]),
            "local_link_integrity_errors": add("lli", 0.05 * state.array("symbol_error"), rng),
            "out_of_buffer": add("oob", 1e-4 + traffic * 1e-3, rng),
            "np_cnp_sent": add("cnp_sent", congestion * 50, rng),
            "rp_cnp_handled": add("cnp_handled", congestion * 50, rng),
            "np_ecn_marked_roce_packets": add("ecn", congestion * 60, rng),
            "pfc_rx_pause_frames": add("pfc_rx", congestion * 5 + state.array("pfc_rx"), rng),
            "pfc_tx_pause_frames": add("pfc_tx", congestion * 5 + state.array("pfc_tx"), rng),
        }

    def _rate(self, state: BlockState, shape: tuple[int, int]) -> np.ndarray:
        """The rate the port trained at: its generation's, unless it trained down."""
        if not state.touched("link_rate"):
            return np.broadcast_to(self.rate_gbps, shape)
        return np.round(self.rate_gbps * state.array("link_rate"), 1)

    def _nic_fields(self, block: BlockInput) -> dict[str, np.ndarray]:
        rng, state = block.rng, block.nic
        shape = (block.seconds, self.node_count)
        # Storage and dataloader traffic; checkpoints push a burst out.
        out_rate = 4e7 + 6e8 * block.checkpointing
        rate = np.broadcast_to(out_rate * (1 + np.abs(noise(rng, shape, 0.1))), shape)
        speed = np.full(shape, NIC_SPEED_MBPS, dtype=np.int64)
        if state.touched("nic_speed"):  # negotiated down: traffic squeezes under the new speed
            speed = np.round(NIC_SPEED_MBPS * state.array("nic_speed")).astype(np.int64)
            rate = np.minimum(rate, speed * 1e6 / 8 * LINE_EFFICIENCY)
        add = self.counters.add
        return {
            "up": np.ones(shape, dtype=bool),
            "speed_mbps": speed,
            "rx_bytes": add("nic_rx", rate * 0.5, rng, poisson=False, start=self.nic_start[0]),
            "tx_bytes": add("nic_tx", rate, rng, poisson=False, start=self.nic_start[1]),
            "rx_packets": add("nic_rxp", rate * 0.5 / 1500, rng, poisson=False),
            "tx_packets": add("nic_txp", rate / 1500, rng, poisson=False),
            "rx_errors": add("nic_rxe", 1e-5 + state.array("rx_errors"), rng),
            "tx_errors": add("nic_txe", np.full(shape, 1e-6), rng),
            "rx_dropped": add("nic_rxd", np.full(shape, 2e-3), rng),
            "tx_dropped": add("nic_txd", np.full(shape, 1e-5), rng),
        }


IB_FIELDS = (
    "state",
    "phys_state",
    "rate_gbps",
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_xmit_discards",
    "port_xmit_wait",
    "port_rcv_data_bytes",
    "port_xmit_data_bytes",
    "local_link_integrity_errors",
    "out_of_buffer",
)
ROCE_FIELDS = (
    "np_cnp_sent",
    "rp_cnp_handled",
    "np_ecn_marked_roce_packets",
    "pfc_rx_pause_frames",
    "pfc_tx_pause_frames",
)
