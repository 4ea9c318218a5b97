"""A cluster without Reflex's agent: its GPUs reported by dcgm-exporter or Telegraf's nvidia_smi,
its ports by Telegraf's infiniband, only the training hook in Reflex's names. Replayed through
the real flow (the line-protocol source translates as it reads), the injected fault is found on
the right node and component.

The replays are simulated runs written out in the foreign shapes by ``tests/foreign_inverse.py``
(the inverse of the conversions in ``schemas/foreign/``; the conversions themselves are pinned
by the golden files of ``test_foreign_translate.py``). Agent-only data (host, NIC, NVLink, kernel
and NVML events) is left out, as such a cluster does not have it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from foreign_inverse import foreign_replay
from test_hang_event_says_why import long_steps_scenario

from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.runner import RunResult, run_in_process

pytestmark = pytest.mark.slow


def io_stall(host: bool) -> tuple[str, str]:
    """The stall's scenario and node. With host telemetry, the library's fault_io_stall on 6
    nodes, not 12: the same stall, half the lines to translate. Without it, the 12-node one: on
    6 nodes the stall's slow steps alone name the node's port, not its host (a limit of judging
    a host from its ranks' steps among few peers)."""
    if host:
        return str(
            Path(__file__).resolve().parent / "scenarios" / "fault_io_stall_six_nodes.toml"
        ), "node-0004"
    return "fault_io_stall", "node-0006"


def replay(lines: list[str], path: Path) -> tuple[RunResult, Counter[str]]:
    path.write_text("\n".join(lines) + "\n")
    carried = Counter[str]()

    def collect(route: str, item: object) -> None:
        if route == "points":
            for point in item:  # type: ignore[attr-defined]
                if point.measurement == "reflex_rejects" and point.tags["where"] == "carried":
                    carried[point.tags["reason"]] += int(point.fields["records"])

    return run_in_process(LineProtocolSource(path, 1, 10.0), on_output=collect), carried


def test_dcgm_exporter_xid79_is_found_on_its_gpu(tmp_path: Path) -> None:
    """The XID comes only from dcgm-exporter's last-XID gauge (the kernel log is not read)."""
    lines = foreign_replay("fault_xid79", 340, "dcgm_v2")  # the XID hits at 300 s
    assert not any(line.startswith("event,") and "kind=xid" in line for line in lines)
    result, carried = replay(lines, tmp_path / "dcgm.lp")
    explicit = [e for e in result.events if e.trigger == "explicit"]
    assert [(e.top.node, e.top.component, e.top.index) for e in explicit if e.top] == [
        ("node-0006", "gpu", "3")
    ]  # fmt: skip
    # Critical and named: without the gauge, the rank's exit message alone names the GPU, but
    # only as a warning (checked by hand: 'unspecified launch failure', severity warning).
    assert explicit[0].severity == "critical" and "fallen off the bus" in explicit[0].summary
    # Nothing refused; the two dcgm metrics with no Reflex field noted once each.
    assert result.error_counts == Counter({"foreign_field_ignored": 2})
    assert carried["foreign_tag"] > 0  # UUID, device, url: carried, counted


def test_telegraf_only_cluster_finds_a_flapping_infiniband_port(tmp_path: Path) -> None:
    lines = foreign_replay("fault_ib_flapping", 370, "telegraf", site=True)  # flaps from 300 s
    result, carried = replay(lines, tmp_path / "telegraf.lp")
    suspects = [(e.top.node, e.top.component, e.top.index) for e in result.events if e.top]
    assert suspects[:1] == [("node-0006", "nic", "mlx5_3/1")]
    assert set(result.error_counts) == {"foreign_field_ignored"}
    assert carried["foreign_tag"] > 0  # pstate and name, not the declared rack


@pytest.mark.parametrize("host", [True, False], ids=["with-net-and-diskio", "gpus-and-ports-only"])
def test_telegraf_net_and_diskio_show_a_checkpoint_is_no_hang(tmp_path: Path, host: bool) -> None:
    """With Telegraf's net and diskio beside nvidia_smi, a job's long unmarked checkpoint is seen
    as written (every GPU idle, the hosts writing); without them nothing says the idle GPUs were
    writing, and the stall is a hang that names no part, as for a job with the hook only."""
    scenario = tmp_path / "long_checkpoint.toml"
    scenario.write_text(long_steps_scenario(120.0, host_disk=True))
    lines = foreign_replay(str(scenario), 600, "telegraf", host=host)
    assert any(line.startswith("diskio,") for line in lines) == host
    result, _ = replay(lines, tmp_path / "telegraf.lp")
    hangs = [e for e in result.events if e.trigger == "hang"]
    assert len(hangs) == (0 if host else 1), [e.summary for e in result.events]
    assert all(e.top is None for e in hangs)
    assert set(result.error_counts) <= {"foreign_field_ignored"}


@pytest.mark.parametrize("host", [True, False], ids=["with-pressure", "gpus-and-ports-only"])
def test_telegraf_pressure_says_why_a_host_slows_its_ranks(tmp_path: Path, host: bool) -> None:
    """A dataloader stalled on I/O: its node's ranks compute slowly, so the host is named either
    way; with Telegraf's pressure points the event says it is I/O pressure, without them it has
    only the slow steps to show."""
    scenario, stalled = io_stall(host)
    lines = foreign_replay(scenario, 420, "telegraf", host=host)  # stalls from 300 s
    assert any(line.startswith("pressure,") for line in lines) == host
    result, carried = replay(lines, tmp_path / "telegraf.lp")
    named = [e.top for e in result.events if e.top is not None]
    assert [(top.node, top.component) for top in named][:1] == [(stalled, "host")]
    signals = {evidence.signal for evidence in named[0].evidence}
    assert ("host_io_pressure" in signals) == host, signals
    assert set(result.error_counts) == {"foreign_field_ignored"}
    assert carried["foreign_tag"] > 0  # nvidia_smi's pstate and name


@pytest.mark.parametrize("host", [True, False], ids=["with-node-exporter", "gpus-only"])
def test_dcgm_and_node_exporter_cluster_tells_a_checkpoint_and_an_io_stall(
    tmp_path: Path, host: bool
) -> None:
    """The common Prometheus stack, dcgm-exporter beside node_exporter, through Telegraf: with
    node_exporter's disk, NIC and pressure counters a long unmarked checkpoint is seen written
    (no hang), and a host's I/O stall is named with its pressure; with dcgm-exporter alone the
    checkpoint is a hang that names no part and the stall shows only as slow steps."""
    scenario = tmp_path / "long_checkpoint.toml"
    scenario.write_text(long_steps_scenario(120.0, host_disk=True))
    lines = foreign_replay(str(scenario), 600, "dcgm_v1", host=host, host_source="node_exporter")
    assert any(line.startswith("node_disk_written_bytes_total,") for line in lines) == host
    result, _ = replay(lines, tmp_path / "checkpoint.lp")
    hangs = [e for e in result.events if e.trigger == "hang"]
    assert len(hangs) == (0 if host else 1), [e.summary for e in result.events]
    assert set(result.error_counts) == {"foreign_field_ignored"}  # the two dcgm metrics
    stall, stalled = io_stall(host)
    lines = foreign_replay(stall, 420, "dcgm_v1", host=host, host_source="node_exporter")
    result, _ = replay(lines, tmp_path / "io_stall.lp")
    named = [e.top for e in result.events if e.top is not None]
    assert [(top.node, top.component) for top in named][:1] == [(stalled, "host")]
    assert ("host_io_pressure" in {e.signal for e in named[0].evidence}) == host
