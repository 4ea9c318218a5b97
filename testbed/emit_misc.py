"""Slow and discrete rows of one node: kernel and NVML events, gpu_topology, gpu_info,
the agent's self-metrics (with its measured clock offset) and NVLink counters."""

from __future__ import annotations

import hashlib

import numpy as np

from testbed import lp
from testbed.model import Fleet, Node

DRIVER = {"hgx_ndr": "550.90.07", "aisle_hdr": "535.183.01", "site_roce": "560.35.03"}


def _periodic(offset: float, period: float, t0: float, t1: float) -> list[float]:
    k0 = int(np.ceil((t0 - offset) / period))
    return [offset + k * period for k in range(max(k0, 0), int(np.ceil((t1 - offset) / period)))
            if t0 <= offset + k * period < t1]  # fmt: skip


class MiscState:
    def __init__(self, fleet: Fleet, node: Node, offset: float, rng: np.random.Generator) -> None:
        self.fleet, self.node, self.offset, self.rng = fleet, node, offset, rng
        self.tags = {"cluster": fleet.cluster, "node": node.name, **lp.site(fleet, node)}
        self.nvlink = np.zeros((8, node.model.nvlinks, 4), dtype=np.int64)

    def _ns(self, t: float) -> int:
        return self.fleet.start_ns + round((t + self.node.skew_s) * 1e9)

    def _event(self, t: float, source: str, kind: str, fields: str, out: list) -> None:
        head = lp.head("event", {**self.tags, "source": source, "kind": kind})
        st = self._ns(t)
        out.append((st, f"{head} {fields} {st}"))

    def rows(self, t0: float, t1: float, out: list[tuple[int, str]]) -> None:
        fleet, node = self.fleet, self.node
        for f in fleet.faults:
            if f.node != node.index:
                continue
            bus = node.bus_ids[int(f.index)][:10] if f.component == "gpu" else ""
            if f.kind == "xid79" and t0 <= f.start_s < t1:
                msg = (f"NVRM: Xid (PCI:{bus}): 79, pid='<unknown>', name=<unknown>, "
                       "GPU has fallen off the bus.")  # fmt: skip
                self._event(
                    f.start_s,
                    "kernel",
                    "xid",
                    f"code=79i,device={lp.string(bus)},message={lp.string(msg)}",
                    out,
                )
                self._event(
                    f.start_s + 1.0,
                    "nvml",
                    "gpu_lost",
                    f"gpu={f.index}i,device={lp.string(node.bus_ids[int(f.index)])},"
                    f"message={lp.string(f'GPU {f.index} is lost: GpuIsLost')}",
                    out,
                )
            if f.kind == "hbm_uncorrectable" and t0 <= f.start_s < t1:
                msg = (f"NVRM: Xid (PCI:{bus}): 94, pid=48213, name=python3, Contained: SM "
                       "(0x1). RST: No, D-RST: No")  # fmt: skip
                self._event(
                    f.start_s,
                    "kernel",
                    "xid",
                    f"code=94i,device={lp.string(bus)},message={lp.string(msg)}",
                    out,
                )
                self._event(
                    f.start_s + 0.4,
                    "nvml",
                    "xid",
                    f"code=94i,gpu={f.index}i,message="
                    f"{lp.string(f'XID 94 on GPU {f.index}: contained ECC error')}",
                    out,
                )
            if f.kind == "ib_link_flap":
                hca = f.index.split("/")[0]
                port = next(p for p in node.ports if p.hca == hca)
                for down_at, up_at in f.episodes:
                    for t, state in ((down_at, "down"), (up_at, "up")):
                        if t0 <= t < t1:
                            msg = (
                                f"mlx5_core {node.bus_ids[0][:8]}:00.1 {port.netdev}: Link {state}"
                            )
                            self._event(t, "kernel", f"link_{state}",
                                        f"device={lp.string(port.netdev)},message={lp.string(msg)}",
                                        out)  # fmt: skip
        for b in fleet.benign:
            if node.index not in b.nodes:
                continue
            if b.kind == "mgmt_switch_reboot":
                for t, state in ((b.start_s + 1.0, "Down"), (b.end_s - 5.0, "Up")):
                    if t0 <= t < t1:
                        msg = f"ice 0000:05:00.0 eno1: NIC Link is {state}"
                        self._event(
                            t,
                            "kernel",
                            f"link_{state.lower()}",
                            f'device="eno1",message={lp.string(msg)}',
                            out,
                        )
            if b.kind == "oom_kill_sidecar" and t0 <= b.start_s < t1:
                msg = ("Out of memory: Killed process 31337 (fluent-bit) total-vm:2317212kB, "
                       "anon-rss:1048576kB")  # fmt: skip
                self._event(
                    b.start_s,
                    "kernel",
                    "oom_kill",
                    f'device="fluent-bit",message={lp.string(msg)}',
                    out,
                )
        lost = {int(f.index): f.start_s for f in fleet.faults
                if f.node == node.index and f.kind == "xid79"}  # fmt: skip
        for t in _periodic(self.offset, 1800.0, t0, t1):
            for g in range(8):
                if g in lost and t > lost[g]:
                    continue
                uuid = hashlib.sha1(f"{node.name}/{g}".encode()).hexdigest()
                st = self._ns(t)
                head = lp.head("gpu_info", {**self.tags, "gpu": str(g),
                                            "profile": node.model.profile})  # fmt: skip
                out.append((st, (
                    f'{head} uuid="GPU-{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-'
                    f'{uuid[20:32]}",serial="{int(uuid[:10], 16) % 10**13:013d}"'
                    f',pci_bus_id="{node.bus_ids[g].upper()}",name={lp.string(node.model.marketing_name)}'
                    f',driver_version="{DRIVER[fleet.name]}" {st}'
                )))  # fmt: skip
        if fleet.topology:
            for t in _periodic(self.offset + 0.5, 300.0, t0, t1):
                st = self._ns(t)
                for g in range(8):
                    port = node.ports[node.gpu_rail[g]]
                    head = lp.head("gpu_topology", {**self.tags, "gpu": str(g)})
                    out.append((st, (
                        f'{head} hca="{port.hca}",hca_port={port.port}i'
                        f',pci_bus_id="{node.bus_ids[g].upper()}",path="PIX"'
                        f",numa_node={g // 4}i {st}"
                    )))  # fmt: skip
        for t in _periodic(self.offset + 0.2, 60.0, t0, t1):
            st = self._ns(t)
            head = lp.head("reflex_collector", {**self.tags, "collector": "gpu"})
            skew = f",clock_offset_seconds={-node.skew_s:.3f}" if abs(node.skew_s) > 0.5 else ""
            out.append((st, f'{head} duration_seconds={self.rng.uniform(0.004, 0.02):.4f}'
                            f',success=true,points={8 if not lost else 7}i,errors=0i'
                            f',version="0.1.0"{skew} {st}'))  # fmt: skip
        if fleet.nvlink_every_s:
            for t in _periodic(self.offset + 0.7, fleet.nvlink_every_s, t0, t1):
                st = self._ns(t)
                for g in range(8):
                    if g in lost and t > lost[g]:
                        continue
                    self.nvlink[g, :, 0] += self.rng.poisson(0.02, node.model.nvlinks)
                    for link in range(node.model.nvlinks):
                        c = self.nvlink[g, link]
                        head = lp.head(
                            "gpu_nvlink", {**self.tags, "gpu": str(g), "link": str(link)}
                        )
                        out.append((st, (
                            f"{head} active=true,crc_flit_errors={int(c[0])}i,crc_data_errors="
                            f"{int(c[1])}i,replay_errors={int(c[2])}i"
                            f",recovery_errors={int(c[3])}i {st}"
                        )))  # fmt: skip
