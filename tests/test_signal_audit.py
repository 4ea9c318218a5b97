"""Every declared telemetry field feeds a signal, has another use, or says why it has none."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from reflex_localize.flows.signals import audit as signal_audit
from reflex_localize.flows.signals.derive import SIGNAL_INDEX, CounterMemory, derive
from reflex_localize.schemas.contract import load_schema
from reflex_localize.schemas.frame import Frame

SIGNAL_AUDIT_DOC = Path(__file__).resolve().parent.parent / "docs" / "signal-audit.md"


def test_every_audited_field_is_accounted_for() -> None:
    schema = load_schema()
    for name in signal_audit.AUDITED:
        for field_name in schema.measurements[name].fields:
            assert signal_audit.uses(name, field_name)  # raises KeyError when missing


def test_reasons_name_declared_fields_that_no_signal_reads() -> None:
    schema = load_schema()
    for measurement, field_name in [*signal_audit.OTHER_USES, *signal_audit.UNUSED]:
        assert field_name in schema.measurements[measurement].fields, (measurement, field_name)
        assert not signal_audit.signals_reading(measurement, field_name), (measurement, field_name)
    assert not set(signal_audit.OTHER_USES) & set(signal_audit.UNUSED)


def test_the_docs_carry_the_generated_table() -> None:
    assert signal_audit.table() in SIGNAL_AUDIT_DOC.read_text()


def _gpu_frame(**fields: list[float]) -> Frame:
    n = len(next(iter(fields.values())))
    tags = {
        "cluster": np.array(["c"] * n, dtype=object),
        "node": np.array([f"n{i}" for i in range(n)], dtype=object),
        "gpu": np.array(["0"] * n, dtype=object),
        "profile": np.array(["h100-sxm5-80gb"] * n, dtype=object),
    }
    return Frame(
        "gpu", np.arange(n, dtype=np.int64), tags, {k: np.array(v) for k, v in fields.items()}
    )


def test_fields_once_unread_now_give_values() -> None:
    """A power cap, a slow HBM clock and the software power-cap bit were invisible before."""
    frame = _gpu_frame(
        power_limit_watts=[700.0, 500.0],
        memory_clock_mhz=[2619, 1593],
        memory_clock_max_mhz=[2619, 2619],
        clocks_event_reasons=[0, 0x4],
    )
    got = derive([frame], 10.0, CounterMemory())
    row = {e: i for i, e in enumerate(got.entities.tolist())}
    capped = got.values[row["n1|gpu|0"]]
    healthy = got.values[row["n0|gpu|0"]]
    assert capped[SIGNAL_INDEX["power_limit_low"]] == 1.0
    assert healthy[SIGNAL_INDEX["power_limit_low"]] == 0.0
    assert (
        capped[SIGNAL_INDEX["memory_clock_low"]] < 0.7 < healthy[SIGNAL_INDEX["memory_clock_low"]]
    )
    assert capped[SIGNAL_INDEX["throttle_sw_power_cap"]] == 1.0


def test_a_host_takes_its_busiest_disk() -> None:
    """Counters are per disk (never one disk's value minus another's), the host's worst wins."""
    memory = CounterMemory()
    values = []
    for t, (sda, sdb) in enumerate([(100.0, 5.0), (101.0, 14.0)]):
        tags = {
            "cluster": np.array(["c", "c"], dtype=object),
            "node": np.array(["n0", "n0"], dtype=object),
            "device": np.array(["sda", "sdb"], dtype=object),
        }
        frame = Frame("host_disk", np.array([t, t], dtype=np.int64), tags,
                      {"io_time_seconds": np.array([sda, sdb])})  # fmt: skip
        got = derive([frame], 10.0, memory)
        assert got.entities.tolist() == ["n0|host|-"]
        values.append(got.values[0, SIGNAL_INDEX["disk_busy"]])
    assert values[1] == 0.9  # sdb busy 9 of 10 s; sda 1 of 10 s
