"""Values no sensor could read: refused with a reason and counted, never evidence.

The probe of issue 40 sent ``loss=99999999999999999999999i``: it was read as the float 1e23,
raised false "silent data corruption" warnings, and the one on the XID's node held the XID
back. Now an integer beyond int64 is refused where line protocol is decoded, and every numeric
field has a plausible range (``schemas/fields.csv``, narrowed per GPU model by the hardware
profiles' ``[plausible]`` tables) that the flow's one validation step enforces.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from reflex_localize.collectors.agent import Agent
from reflex_localize.collectors.hook_receiver import HookReceiver
from reflex_localize.collectors.hook_socket import HEADER, MAX_DATAGRAM_BYTES
from reflex_localize.collectors.sinks import StdoutSink
from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.runner import RunResult, run_in_process
from reflex_localize.schemas.codec import PointError, decode
from reflex_localize.schemas.contract import SchemaError, load_schema, parse_schema
from reflex_localize.schemas.frame import Frame, validate_frame
from reflex_localize.schemas.frame_codec import encode_frame
from reflex_localize.schemas.hardware_profiles import load_profiles
from reflex_localize.schemas.line_decoder import decode_block
from reflex_localize.schemas.ranges import plausible_range
from reflex_localize.simulator import Simulation, load_scenario

STEP = "train_step,cluster=c,job=j,node=n1,rank=0"
HUGE = "99999999999999999999999"


@pytest.mark.parametrize("value", [f"{HUGE}i", f"-{HUGE}i", f"{2**63}i", f"{2**64}u", "-1u"])
@pytest.mark.parametrize("field", ["loss", "step"])  # a float field and an int field
def test_integers_beyond_64_bits_are_refused_by_both_decoders(field: str, value: str) -> None:
    line = f"{STEP} {field}={value} 1"
    with pytest.raises(PointError) as refused:
        decode(line)
    assert refused.value.code == "int_overflow" and "64-bit int" in refused.value.reason
    block = decode_block([f"{STEP} {field}=1i 1", line])
    assert [(position, error.code) for position, error in block.rejects] == [(1, "int_overflow")]  # type: ignore[attr-defined]


def test_the_largest_int64_still_reads() -> None:
    assert decode(f"{STEP} step={2**63 - 1}i 1").fields["step"] == 2**63 - 1


def _frame(measurement: str, tags: dict[str, str], fields: dict[str, list]) -> Frame:
    rows = len(next(iter(fields.values())))
    return Frame(
        measurement,
        np.arange(rows, dtype=np.int64),
        {name: np.array([value] * rows, object) for name, value in tags.items()},
        {name: np.array(values) for name, values in fields.items()},
    )


def test_out_of_range_rows_are_refused_with_their_reason() -> None:
    frame = _frame(
        "train_step",
        {"cluster": "c", "job": "j", "node": "n1", "rank": "0"},
        {"loss": [2.5, 1e23, 2.4, -3e9], "step_time_seconds": [0.5, 0.5, -1.0, 0.5]},
    )
    good, bad = validate_frame(frame, carry_tags=True)
    assert good.fields["loss"].tolist() == [2.5]
    assert [error.code for _, error in bad] == ["out_of_range"] * 3
    assert str(bad[0][1]) == "train_step.loss: 1e+23 is outside the plausible range [-1e+09, 1e+09]"
    assert "step_time_seconds: -1.0 is outside" in str(bad[1][1])


def test_a_profile_narrows_a_gpu_field_to_its_model() -> None:
    # 1,000 W is a plausible H200 reading (limit 700 W) and no A100's (limit 400 W).
    tags = {"cluster": "c", "node": "n1", "gpu": "0"}
    frame = _frame("gpu", tags, {"power_watts": [1000.0, 1000.0, 6000.0]})
    frame.tags["profile"] = np.array(["h200-sxm-141gb", "a100-sxm4-80gb", "unknown"], object)
    good, bad = validate_frame(frame)
    assert good.tags["profile"].tolist() == ["h200-sxm-141gb"]
    assert [str(error) for _, error in bad] == [
        "gpu.power_watts: 1000.0 is outside the plausible range [0, 800] watts on a100-sxm4-80gb",
        "gpu.power_watts: 6000.0 is outside the plausible range [0, 5000] watts on unknown",
    ]


def test_every_profile_range_is_plausible_and_names_a_gpu_field() -> None:
    """What a profile calls normal, and its limits, must pass its own plausible ranges; and a
    plausible table only names gpu fields with a schema range it narrows."""
    gpu = load_schema().measurement("gpu")
    for profile in load_profiles().values():
        assert profile.plausible, profile.name
        for name, (low, high) in profile.plausible.items():
            assert name in gpu.fields and low <= high, (profile.name, name)
        for name, (low, high) in profile.ranges.items():
            plausible_low, plausible_high = plausible_range(gpu.fields[name], profile.name)
            assert plausible_low <= low <= high <= plausible_high, (profile.name, name)
        for name, limit in profile.limits.items():
            if name in gpu.fields:
                plausible_low, plausible_high = plausible_range(gpu.fields[name], profile.name)
                assert plausible_low <= limit <= plausible_high, (profile.name, name)
        assert plausible_range(gpu.fields["memory_used_bytes"], profile.name)[1] >= (
            profile.memory_total_bytes
        )


def test_ranges_are_only_for_numbers_and_in_order() -> None:
    measurement = {"measurement": "m", "tags": "cluster node", "help": "h"}
    field = {"measurement": "m", "field": "f", "type": "float", "unit": "u", "kind": "gauge"}
    assert (
        parse_schema([measurement], [{**field, "min": "0", "max": "1", "help": "h"}])
        .field("m", "f")
        .high
        == 1.0
    )
    for extra, message in [
        ({"type": "string", "min": "0"}, "has a range but is of type string"),
        ({"min": "2", "max": "1"}, "min 2.0 above max 1.0"),
        ({"max": "lots"}, "no number"),
        ({"max": "inf"}, "not finite"),
    ]:
        with pytest.raises(SchemaError, match=message):
            parse_schema([measurement], [{**field, "help": "h", **extra}])


# -- the whole flow ----------------------------------------------------------------------------

SECONDS = 400  # the XID 79 of fault_xid79 hits at 300 s


@pytest.fixture(scope="module")
def clean_lines() -> list[str]:
    sim = Simulation(load_scenario("fault_xid79"), seed=7)
    lines: list[str] = []
    for number, chunk in enumerate(sim.chunks(seconds=10)):
        if number * 10 >= SECONDS:
            break
        for frame in chunk:
            lines += encode_frame(frame)
    return lines


def _replay(lines: list[str], directory: Path) -> RunResult:
    directory.mkdir()
    path = directory / "replay.lp"
    path.write_text("\n".join(lines) + "\n")
    return run_in_process(LineProtocolSource(path, 1, 10.0))


def _with_field(line: str, name: str, value: str) -> str:
    head, fields, stamp = line.split(" ")
    pairs = [p if not p.startswith(f"{name}=") else f"{name}={value}" for p in fields.split(",")]
    return f"{head} {','.join(pairs)} {stamp}"


def test_absurd_values_on_the_xid_node_change_no_event(
    clean_lines: list[str], tmp_path: Path
) -> None:
    xid_line = next(
        line for line in clean_lines if line.startswith("event,") and "kind=xid" in line
    )
    node = next(p for p in xid_line.split(" ")[0].split(",") if p.startswith("node="))
    on_node = [
        index for index, line in enumerate(clean_lines)
        if f",{node}," in line and line.startswith("train_step") and "loss=" in line
    ]  # fmt: skip
    gpu_rows = [
        index for index, line in enumerate(clean_lines)
        if line.startswith("gpu,") and f",{node}," in line and "power_watts=" in line
    ]  # fmt: skip
    assert len(on_node) > 40 and len(gpu_rows) > 40
    lines = list(clean_lines)
    for index in on_node[::4]:  # a quarter of its loss reports absurd, as an int or a float
        lines[index] = _with_field(lines[index], "loss", f"{HUGE}i")
    for index in on_node[1::4]:
        lines[index] = _with_field(lines[index], "loss", "1e23")
    for index in gpu_rows[::8]:
        lines[index] = _with_field(lines[index], "power_watts", "1e9")
    clean, hostile = _replay(clean_lines, tmp_path / "a"), _replay(lines, tmp_path / "b")
    assert hostile.error_counts == Counter(
        {"int_overflow": len(on_node[::4]),
         "out_of_range": len(on_node[1::4]) + len(gpu_rows[::8])}
    )  # fmt: skip
    assert [(e.event_id, e.severity) for e in hostile.events] == [
        (e.event_id, e.severity) for e in clean.events
    ]
    assert any(e.trigger == "explicit" and e.severity == "critical" for e in hostile.events)
    assert not any("corruption" in e.summary for e in hostile.events)


# -- the agent's stdout path -------------------------------------------------------------------


def test_one_absurd_drop_count_stops_no_later_hook_batch() -> None:
    """``#reflex-hook v1 dropped=99999999999999999999999``: the receiver adds it to its error
    count, which no int64 self-metric can hold. Under ``collect --stdout`` that one point used
    to fail the encoding of every batch after it, the hook's records with it."""
    path = os.path.join(tempfile.mkdtemp(), "hook.sock")
    receiver = HookReceiver("c1", "n1", path=path)
    out = io.StringIO()
    sink = StdoutSink(out)
    agent = Agent([receiver], sink.emit, cluster="c1", node="n1")
    receiver.start_background(agent.emit)
    try:
        import socket

        sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        for step, dropped in ((1, HUGE), (2, "0"), (3, "5")):
            line = f"train_step,cluster=c1,job=j,node=n1,rank=0 step={step}i {step}"
            payload = f"{HEADER}{dropped}\n{line}\n".encode()
            assert len(payload) < MAX_DATAGRAM_BYTES
            sender.sendto(payload, path)
            assert receiver.wait_for(step)
            agent.run_once()
        sender.close()
    finally:
        receiver.stop_background()
    printed = out.getvalue().splitlines()
    assert [line.split(" ")[1] for line in printed if line.startswith("train_step")] == [
        "step=1i", "step=2i", "step=3i"
    ]  # fmt: skip
    errors = [line for line in printed if line.startswith("reflex_collector")]
    assert len(errors) == 3 and all(f"errors={2**63 - 1}i" in line for line in errors)
