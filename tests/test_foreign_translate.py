"""Telegraf and dcgm-exporter points become Reflex points: names mapped, units converted, tags
taken from the foreign ones; ignored fields counted, unusable points refused with a code.

The inputs (``tests/golden/telegraf_*.lp``, ``dcgm_*.lp``) are written from the tools'
documented field lists (each file's header says which); the expected Reflex points
(``*.reflex.lp``) were reviewed by hand, and the unit conversions are also checked here against
numbers worked out from the documented units, not from the translator.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from foreign_inverse import line
from hypothesis import given, settings
from hypothesis import strategies as st

from reflex_localize.schemas.codec import Point, PointError, decode, encode, format_value
from reflex_localize.schemas.foreign_mapping import load_foreign_mapping
from reflex_localize.schemas.foreign_translate import ForeignTranslator, parse_line

GOLDEN = Path(__file__).parent / "golden"
MIB = 1024 * 1024


def data(name: str) -> list[str]:
    text = (GOLDEN / name).read_text().splitlines()
    return [row for row in text if row.strip() and not row.startswith("#")]


def translate(name: str) -> tuple[list[Point], list, ForeignTranslator]:
    translator = ForeignTranslator(cluster="site-a")
    points, notes = [], []
    for row in data(f"{name}.lp"):
        got, said = translator.decode(row)
        points += got
        notes += said
    return points, notes, translator


GOLDEN_NAMES = ["telegraf_nvidia_smi", "telegraf_infiniband", "telegraf_net", "telegraf_diskio",
                "telegraf_pressure", "node_exporter",
                "dcgm_v1", "dcgm_v2"]  # fmt: skip


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_golden_foreign_lines_give_the_reviewed_reflex_points(name: str) -> None:
    points, _, _ = translate(name)
    written = [line(p.measurement, p.tags, p.fields, p.time_ns) for p in points]
    assert written == data(f"{name}.reflex.lp")


def test_nvidia_smi_units_and_bits() -> None:
    points, notes, translator = translate("telegraf_nvidia_smi")
    first, second, t4 = points
    assert (first.tags["node"], first.tags["gpu"], first.tags["profile"]) == (
        "gpu-node-7", "3", "h100-sxm5-80gb"
    )  # fmt: skip
    assert first.fields["memory_used_bytes"] == 978 * MIB
    assert first.fields["memory_total_bytes"] == 81559 * MIB
    assert first.fields["utilization_gpu_ratio"] == 0.97
    assert first.fields["ecc_corrected_volatile"] == 2 + 1  # DRAM + SRAM
    assert first.fields["ecc_corrected_aggregate_total"] == 12 + 3
    # The HW-thermal counter (microseconds) advanced between the samples: bit 0x40, only then.
    assert (first.fields["clocks_event_reasons"], second.fields["clocks_event_reasons"]) == (
        0,
        0x40,
    )
    assert (first.fields["remapped_rows_pending"], second.fields["remapped_rows_pending"]) == (
        False, True
    )  # fmt: skip
    assert t4.tags["profile"] == "unknown" and t4.tags["rack"] == "r12"  # site tag carried
    assert translator.stats.refused == {"foreign_missing_tag": 1}  # the line with no host
    assert translator.stats.ignored["nvidia_smi.fan_speed"] == 2  # every value counted...
    codes = [(n.where, n.code) for n in notes if "fan_speed" in n.detail]
    assert codes == [("carried", "foreign_field_ignored")]  # ...and noted once
    unknown = [n for n in notes if n.code == "foreign_field_unknown"]
    assert [n.detail.split(":")[0] for n in unknown] == ["nvidia_smi.some_future_field"]


def test_infiniband_words_become_bytes() -> None:
    points, _, _ = translate("telegraf_infiniband")
    counters, later, rdma = points
    assert (counters.tags["hca"], counters.tags["port"], counters.tags["link_layer"]) == (
        "mlx5_3", "1", "InfiniBand"
    )  # fmt: skip
    assert later.fields["port_rcv_data_bytes"] == 1_250_000 * 4
    assert (later.fields["symbol_error"], later.fields["link_downed"]) == (41, 1)
    assert rdma.fields == {"out_of_buffer": 4, "np_cnp_sent": 10, "np_ecn_marked_roce_packets": 12,
                           "rp_cnp_handled": 9}  # fmt: skip


def test_host_nic_and_disk_counters_keep_their_units() -> None:
    """Telegraf's net and diskio give what a checkpoint write shows in: bytes sent and written
    (bytes, as Reflex's agent reads them), and the disk's busy time (ms in Telegraf, s here)."""
    nic, later = translate("telegraf_net")[0]
    assert (nic.measurement, nic.tags["device"]) == ("nic", "eth0")
    assert int(later.fields["tx_bytes"]) - int(nic.fields["tx_bytes"]) == 600_000_000
    assert "speed_mbps" not in later.fields  # -1 where the driver does not say: ignored
    disk, busier = translate("telegraf_diskio")[0]
    assert (disk.measurement, disk.tags["device"]) == ("host_disk", "nvme0n1")
    written = int(busier.fields["written_bytes"]) - int(disk.fields["written_bytes"])
    busy = float(busier.fields["io_time_seconds"]) - float(disk.fields["io_time_seconds"])
    assert (written, busy) == (1_500_000_000, pytest.approx(0.6))


def test_pressure_points_pick_their_field_by_resource_and_type() -> None:
    """Telegraf writes one pressure point per resource and type: the tags pick the Reflex field
    (percent to share, as the agent reads /proc/pressure) and are not carried as series tags;
    the 60 and 300 s averages and the totals are noted once each, whatever the resource."""
    points, notes, translator = translate("telegraf_pressure")
    io_full = points[4]
    assert io_full.fields == {"psi_io_full_avg10_ratio": pytest.approx(21.26 / 100)}
    assert all(set(p.tags) == {"cluster", "node"} for p in points)
    said = sorted(n.detail.split(":")[0] for n in notes)
    assert said == ["pressure.avg10{resource=cpu,type=full}", "pressure.avg300", "pressure.avg60",
                    "pressure.total", "pressureTotal.total"]  # fmt: skip
    assert translator.stats.ignored["pressure.avg60"] == 7  # every point's, counted
    assert not translator.stats.refused


def test_dcgm_xid_gauge_gives_one_event_per_new_code() -> None:
    points, _, _ = translate("dcgm_v1")
    events = [p for p in points if p.measurement == "event"]
    said = [(e.tags["node"], e.tags["kind"], e.fields["code"], e.fields["gpu"]) for e in events]
    assert said == [("gpu-node-7", "xid", 79, 2)]
    assert events[0].fields["device"] == "00000000:5D:00.0"
    powers = [p.fields["power_watts"] for p in points if "power_watts" in p.fields]
    assert powers == [512.5]  # the remote-write shape (field "value")
    _, _, v2 = translate("dcgm_v2")
    assert v2.stats.stale_xids == 1  # XID 48 already there when first seen: not raised


def test_refusals_have_codes_and_keep_the_rest() -> None:
    translator = ForeignTranslator()
    points, notes = translator.decode(
        'nvidia_smi,host=n1,index=0 temperature_gpu="hot",utilization_gpu=50i 1700000000000000000'
    )
    assert [p.fields for p in points] == [{"utilization_gpu_ratio": 0.5}]
    assert [n.code for n in notes] == ["foreign_bad_value"]
    points, notes = translator.decode("DCGM_FI_DEV_GPU_TEMP,Hostname=n1,gpu=0 other=1 1")
    assert points == [] and [n.code for n in notes] == ["foreign_bad_shape"]
    with pytest.raises(PointError) as refused:
        translator.decode("collectd_cpu,host=n1 value=1 1")
    assert refused.value.code == "undeclared_measurement"


@pytest.mark.parametrize("node", ["n 1", "a,b", "k=v", "back\\slash", "ünï 节点"])
def test_reflex_lines_pass_through_and_parse_as_the_codec_reads_them(node: str) -> None:
    reflex = encode(Point("host", {"cluster": "c", "node": node}, {"load1": 0.5}, 7))
    assert ForeignTranslator().decode(reflex) == ([decode(reflex)], [])
    assert parse_line(reflex) == decode(reflex)


MAPPED = sorted({*load_foreign_mapping().tables["telegraf_nvidia_smi"].rows["nvidia_smi"],
                 *load_foreign_mapping().tables["dcgm_exporter"].rows})  # fmt: skip
values = st.one_of(st.text(max_size=8), st.integers(), st.floats(), st.booleans())


@settings(max_examples=200, deadline=None, derandomize=True, database=None)  # repeatable in CI
@given(
    measurement=st.sampled_from(
        ["nvidia_smi", "infiniband", "prometheus", "DCGM_FI_DEV_XID_ERRORS"]
    ),
    fields=st.dictionaries(st.sampled_from([*MAPPED, "gauge", "value"]), values, max_size=4),
    tail=st.text(max_size=20),
)
def test_garbled_foreign_lines_are_refused_not_crashes(
    measurement: str, fields: dict, tail: str
) -> None:
    """Known fields with values of any type (and text of any kind after them): each is
    translated, noted or refused with a PointError, never a crash."""
    body = ",".join(f"{k}={format_value(v)}" for k, v in fields.items()) or "x=1"
    translator = ForeignTranslator()
    for text in (f"{measurement},host=n1,Hostname=n1,index=0,gpu=0,device=d,port=1 {body} 5",
                 f"{measurement},host=n1 {tail}"):  # fmt: skip
        with contextlib.suppress(PointError):
            translator.decode(text)


def test_a_flag_that_is_neither_yes_nor_no_is_a_bad_value() -> None:
    _, notes = ForeignTranslator().decode(
        'nvidia_smi,host=n,index=0 remapped_rows_pending="Maybe" 1'
    )
    assert [n.code for n in notes] == ["foreign_bad_value"]


def test_a_value_that_overflows_its_unit_is_refused() -> None:
    """1.7e302 MiB is not a number of bytes a float holds: refused with its reason, not a crash
    (found by the garbled-lines property test)."""
    translator = ForeignTranslator()
    huge = "prometheus,Hostname=n1,gpu=0 DCGM_FI_DEV_FB_USED=1.7144137714980277e+302 1"
    points, notes = translator.decode(huge)
    assert [n.code for n in notes] == ["foreign_bad_value"]
    assert not any("memory_used_bytes" in p.fields for p in points)
    # 1e15 MiB is finite as a float but not as an int64 count of bytes.
    big = "prometheus,Hostname=n1,gpu=0 DCGM_FI_DEV_FB_USED=1e15 1"
    _, notes = translator.decode(big)
    assert [n.code for n in notes] == ["foreign_bad_value"]
