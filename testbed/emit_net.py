"""``ib_port`` and ``nic`` rows of one node: compute rails carry the job's collectives, the
storage port its checkpoints, the management port almost nothing (and drops a few packets)."""

from __future__ import annotations

import numpy as np

from testbed import lp
from testbed.activity import CKPT, LOADING, TRAIN
from testbed.model import Fleet, Node


class NetState:
    def __init__(self, fleet: Fleet, node: Node, rng: np.random.Generator) -> None:
        self.fleet, self.node, self.rng = fleet, node, rng
        p = len(node.ports)
        big = lambda lo, hi: rng.integers(lo, hi, p).astype(np.int64)  # noqa: E731 - counters since boot
        self.xmit, self.rcv = big(10**13, 10**15), big(10**13, 10**15)
        self.wait = big(10**9, 10**11)
        self.sym = rng.choice([0, 0, 0, 1, 3], p).astype(np.int64)
        self.ler = rng.choice([0, 0, 1], p).astype(np.int64)
        self.downed = rng.choice([0, 1, 1, 2], p).astype(np.int64)  # boot and cabling history
        self.rcverr = np.zeros(p, dtype=np.int64)
        self.discards = rng.integers(0, 20, p).astype(np.int64)
        self.ecn, self.cnp_sent, self.cnp_handled = (
            big(10**5, 10**7),
            big(10**5, 10**7),
            big(10**5, 10**7),
        )
        self.oob = np.zeros(p, dtype=np.int64)
        if node.saturated_port is not None:
            self.sym[node.saturated_port] = 65535
        self.last_t: float | None = None
        self.port_heads = [
            lp.head(
                "ib_port",
                {
                    "cluster": fleet.cluster,
                    "node": node.name,
                    "hca": q.hca,
                    "port": str(q.port),
                    "link_layer": q.link_layer,
                    **lp.site(fleet, node),
                },
            )
            for q in node.ports
        ]
        devs = [(q.netdev, int(q.rate_gbps * 1000), q.role) for q in node.ports]
        devs += [(d.name, d.speed_mbps, d.role) for d in node.netdevs]
        self.devs = devs
        self.dev_heads = [
            lp.head(
                "nic",
                {
                    "cluster": fleet.cluster,
                    "node": node.name,
                    "device": name,
                    **lp.site(fleet, node),
                },
            )
            for name, _, _ in devs
        ]
        d = len(devs)
        self.nrx, self.ntx = big(10**10, 10**12)[:1].repeat(d), big(10**10, 10**12)[:1].repeat(d)
        self.nrx = self.nrx + rng.integers(0, 10**9, d)
        self.ntx = self.ntx + rng.integers(0, 10**9, d)
        self.ndrop = rng.integers(0, 10**5, d).astype(np.int64)
        for i, (_, _, role) in enumerate(devs):
            if role == "unplugged":
                self.nrx[i] = self.ntx[i] = self.ndrop[i] = 0

    def _down(self, port: int, t: float) -> bool:
        for f in self.fleet.faults:
            if f.kind == "ib_link_flap" and f.node == self.node.index:
                q = self.node.ports[port]
                if f.index == f"{q.hca}/{q.port}" and any(a <= t < b for a, b in f.episodes):
                    return True
        return False

    def _flaps(self, port: int, t: float) -> int:
        """Flaps of ``port`` that began since the previous read."""
        q = self.node.ports[port]
        since = self.last_t if self.last_t is not None else t
        return sum(
            1
            for f in self.fleet.faults
            if f.kind == "ib_link_flap" and f.node == self.node.index
            and f.index == f"{q.hca}/{q.port}"
            for a, _ in f.episodes
            if since < a <= t
        )  # fmt: skip

    def _mgmt_down(self, t: float) -> bool:
        return any(b.kind == "mgmt_switch_reboot" and b.start_s <= t < b.end_s
                   and self.node.index in b.nodes for b in self.fleet.benign)  # fmt: skip

    def rows(self, ts: np.ndarray, phase: np.ndarray, frac: np.ndarray,
             out: list[tuple[int, str]]) -> None:  # fmt: skip
        fleet, node, rng = self.fleet, self.node, self.rng
        dt = fleet.sample_s
        stamps = fleet.start_ns + np.round((ts + node.skew_s) * 1e9).astype(np.int64)
        congested = np.zeros(len(ts))
        for b in fleet.benign:
            if b.kind == "fabric_congestion" and node.index in b.nodes:
                congested[(ts >= b.start_s) & (ts < b.end_s)] = 1.0
        degraded: dict[int, float] = {}
        for f in fleet.faults:
            if f.kind == "ib_degraded_speed" and f.node == node.index:
                for i, q in enumerate(node.ports):
                    if f.index == f"{q.hca}/{q.port}":
                        degraded[i] = f.start_s
        for k, t in enumerate(ts.tolist()):
            st = int(stamps[k])
            ph = int(phase[k])
            comm_share = 1.0 - float(frac[k].mean()) if ph == TRAIN else 0.0
            for i, q in enumerate(node.ports):
                rate = q.rate_gbps
                if i in degraded and t >= degraded[i]:
                    rate = rate / 2
                    self.sym[i] += rng.poisson(2.0 * dt)
                down = self._down(i, t)
                flaps = self._flaps(i, t)
                if q.role == "rail":
                    bw = rate * 1e9 / 8 * 0.55 * comm_share * (0.0 if down else 1.0)
                    waits = rng.lognormal(14.5, 0.4) * comm_share * dt
                    if congested[k]:
                        waits *= rng.uniform(15, 40)
                    if i in degraded and t >= degraded[i]:
                        waits *= 4
                    tx = bw * dt * rng.normal(1, 0.03)
                    rx = bw * dt * rng.normal(1, 0.03)
                else:
                    tx = (3.0e9 if ph == CKPT else 0.05e9 if ph == TRAIN else 1e5) * dt
                    rx = (3.5e9 if ph == LOADING else 0.25e9 if ph == TRAIN else 1e5) * dt
                    waits = rng.lognormal(11, 0.5) * dt * (ph in (TRAIN, CKPT))
                self.xmit[i] += int(max(tx, 0) + 4096)
                self.rcv[i] += int(max(rx, 0) + 4096)
                self.wait[i] += int(waits)
                if node.noisy_port == i:
                    self.sym[i] += rng.poisson(dt / 45.0)
                    self.rcverr[i] += rng.poisson(dt / 600.0)
                for _ in range(flaps):  # a flap between two reads still counts
                    self.downed[i] += 1
                    self.ler[i] += rng.integers(1, 4)
                    self.sym[i] += rng.integers(50, 500)
                    self.rcverr[i] += rng.integers(1, 20)
                if node.saturated_port == i:
                    self.sym[i] = 65535
                fields = (
                    f"state={1 if down else 4}i,phys_state={2 if down else 5}i,rate_gbps={rate}"
                    f",symbol_error={min(int(self.sym[i]), 65535)}i"
                    f",link_error_recovery={int(self.ler[i]) % 256}i"
                    f",link_downed={int(self.downed[i]) % 256}i"
                    f",port_rcv_errors={int(self.rcverr[i])}i"
                    f",port_xmit_discards={int(self.discards[i])}i"
                    f",port_xmit_wait={int(self.wait[i])}i"
                    f",port_rcv_data_bytes={int(self.rcv[i])}i"
                    f",port_xmit_data_bytes={int(self.xmit[i])}i"
                    f",local_link_integrity_errors=0i,out_of_buffer={int(self.oob[i])}i"
                )
                if q.link_layer == "Ethernet":
                    marks = rng.poisson(40 * dt * comm_share * (1 + 60 * congested[k]))
                    self.ecn[i] += marks
                    self.cnp_sent[i] += marks
                    self.cnp_handled[i] += rng.poisson(
                        40 * dt * comm_share * (1 + 60 * congested[k])
                    )
                    fields += (f",np_cnp_sent={int(self.cnp_sent[i])}i"
                               f",rp_cnp_handled={int(self.cnp_handled[i])}i"
                               f",np_ecn_marked_roce_packets={int(self.ecn[i])}i")  # fmt: skip
                out.append((st, f"{self.port_heads[i]} {fields} {st}"))
            self.last_t = t
            for j, (_, speed, role) in enumerate(self.devs):
                up = True
                if j < len(node.ports):
                    up = not self._down(j, t)
                    q = node.ports[j]
                    if j in degraded and t >= degraded[j]:
                        speed //= 2
                    if q.role == "storage":
                        rx = (3.5e9 if ph == LOADING else 0.25e9 if ph == TRAIN else 2e4) * dt
                        tx = (3.0e9 if ph == CKPT else 0.05e9 if ph == TRAIN else 2e4) * dt
                    else:  # IPoIB / RoCE netdev: RDMA traffic never shows here
                        rx = tx = rng.uniform(2e3, 3e4) * dt
                elif role == "mgmt":
                    up = not self._mgmt_down(t)
                    rx, tx = rng.uniform(1e6, 4e6) * dt, rng.uniform(0.5e6, 2e6) * dt
                    self.ndrop[j] += rng.poisson(2.0 * dt)  # multicast/LLDP the host drops
                else:
                    up = False
                    rx = tx = 0.0
                if not up:
                    rx = tx = 0.0
                self.nrx[j] += int(rx)
                self.ntx[j] += int(tx)
                spd = f",speed_mbps={speed}i" if up else ""
                out.append((st, (
                    f"{self.dev_heads[j]} up={'true' if up else 'false'}{spd}"
                    f",rx_bytes={int(self.nrx[j])}i,tx_bytes={int(self.ntx[j])}i"
                    f",rx_packets={int(self.nrx[j]) // 1500}i"
                    f",tx_packets={int(self.ntx[j]) // 1500}i,rx_errors=0i,tx_errors=0i"
                    f",rx_dropped={int(self.ndrop[j])}i,tx_dropped=0i {st}"
                )))  # fmt: skip
