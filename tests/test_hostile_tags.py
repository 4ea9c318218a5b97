"""One line-protocol escaping everywhere. For hostile job ids and node names, the training
hook (which carries its own copy of the rules, to stay standard-library only), the codec's
``encode``, the frame encoder and the writer's frame path write byte-identical lines, and
``decode`` gives back the values that went in. Values line protocol cannot carry are refused
by the codec and the frame encoder alike; the hook, which must never raise, writes them made
writable, and the same way in its tags and in the ``job`` field of its events."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reflex_localize.collectors import training_hook
from reflex_localize.collectors.training_hook import TrainingHook, http_sink, writable_tag_value
from reflex_localize.influx.local_server import InfluxServer
from reflex_localize.influx.write_transport import SendResult
from reflex_localize.influx.writer import Writer
from reflex_localize.schemas import codec
from reflex_localize.schemas.codec import Point, PointError, decode, encode, validate
from reflex_localize.schemas.frame import Frame, frames_from_points
from reflex_localize.schemas.frame_codec import encode_frame

# Each is written as it is: InfluxDB keeps a backslash in a tag as it is, and the codec refuses
# one only before a space, comma or equals sign, or at the end.
WRITABLE = [
    "llama 70b",
    "job,with,commas",
    "k=v==",
    "back\\slash",
    "\\leading",
    "two\\\\in a row",
    'say "hi"',
    "'single'",
    "tab\there",
    "ünïcødé-节点-ノード",
    "emoji 🚀🔥",
    "\u200bzero-width",
    'all of it: \\x ,= " ü 🚀',
]
# Not writable as they are; the hook writes the value on the right.
UNWRITABLE = {
    "trailing\\": "trailing",
    "back\\ space": "back space",
    "back\\,comma": "back,comma",
    "back\\=equals": "back=equals",
    "many\\\\\\ before": "many before",
    "line\nbreak": "line break",
    "carriage\rreturn": "carriage return",
    "\\": "unknown",
    "\\\\": "unknown",
}
GOLDEN = {  # reviewed by hand: the tag as it appears on the wire
    "llama 70b": "llama\\ 70b",
    "job,with,commas": "job\\,with\\,commas",
    "k=v==": "k\\=v\\=\\=",
    "back\\slash": "back\\slash",
    'say "hi"': 'say\\ "hi"',
    "emoji 🚀🔥": "emoji\\ 🚀🔥",
}


def hook_lines(job: str, node: str, kind: str) -> tuple[TrainingHook, list[str]]:
    batches: list[str] = []
    hook = TrainingHook(job=job, rank=3, world_size=8, cluster=node, node=node, profile=job,
                        sink=batches.append, env={}, flush_interval_s=60.0)  # fmt: skip
    hook.step(tokens=1024, loss=1.5)
    hook.event(kind, f"message about {job}", code=7)
    hook.close()
    # Line protocol ends lines at "\n" only; str.splitlines would also cut at "\x1e" or "\u2028".
    return hook, "".join(batches).split("\n")[:-1]


def expected_point(line: str, hook: TrainingHook, kind: str) -> Point:
    """The point the hook means by ``line``: its tags from the values the hook was given (or
    chose, for empty ones), never from the line; its numbers (step times, stamps) from the
    line, as they are not at issue here."""
    measured = decode(line)
    cluster, job, node = map(writable_tag_value, (hook.cluster, hook.info.job, hook.node))
    if measured.measurement == "event":
        tags = {"cluster": cluster, "kind": writable_tag_value(kind), "node": node,
                "source": "training"}  # fmt: skip
    else:
        tags = {"cluster": cluster, "job": job, "node": node, "rank": "3"}
    return Point(measured.measurement, tags, measured.fields, measured.time_ns)


def assert_one_escaping(job: str, node: str, kind: str = "nccl_timeout") -> None:
    hook, lines = hook_lines(job, node, kind)
    assert [decode(line).measurement for line in lines] == [
        "job_membership", "train_step", "event", "job_membership"
    ]  # fmt: skip
    for line in lines:
        point = expected_point(line, hook, kind)
        assert line == encode(point)
        [frame] = frames_from_points([point])
        assert encode_frame(frame) == [line]
        assert decode(line) == validate(point)
    job_tag = decode(lines[1]).tags["job"]
    assert decode(lines[2]).fields["job"] == job_tag == writable_tag_value(hook.info.job)


def test_the_hook_carries_the_codecs_escape_tables() -> None:
    assert training_hook._KEY_ESCAPES == codec.KEY_ESCAPES
    assert training_hook._STRING_ESCAPES == codec.STRING_ESCAPES


@pytest.mark.parametrize("value", WRITABLE)
def test_writable_values_are_written_one_way_everywhere(value: str) -> None:
    assert writable_tag_value(value) == value
    assert_one_escaping(job=value, node=value, kind=value)


@pytest.mark.parametrize("value", GOLDEN)
def test_tags_on_the_wire(value: str) -> None:
    _, lines = hook_lines(value, "n1", "k")
    assert f",job={GOLDEN[value]},node=n1,rank=3 " in lines[1]
    point = Point("host", {"cluster": "c", "node": value}, {"load1": 0.5}, 1)
    assert encode(point) == f"host,cluster=c,node={GOLDEN[value]} load1=0.5 1"
    assert encode_frame(frames_from_points([point])[0]) == [encode(point)]


@pytest.mark.parametrize(("value", "written"), UNWRITABLE.items())
def test_unwritable_values_are_refused_by_the_codec_and_made_writable_by_the_hook(
    value: str, written: str
) -> None:
    point = Point("host", {"cluster": "c", "node": value}, {"load1": 0.5}, 1)
    with pytest.raises(PointError, match="node"):
        encode(point)
    [frame] = frames_from_points([Point("host", {"cluster": "c", "node": "ok"}, {"load1": 0.5}, 1)])
    frame.tags["node"] = np.array([value], dtype=object)
    with pytest.raises(PointError, match="node"):
        encode_frame(frame)
    assert writable_tag_value(value) == written
    assert_one_escaping(job=value, node=value, kind=value)


hostile_characters = st.sampled_from(" ,=\\\"'\n\r\tü节🚀\u2028")
tag_text = st.text(st.one_of(hostile_characters, st.characters(codec="utf-8")), max_size=12)


@settings(max_examples=150, deadline=None)
@given(job=tag_text, node=tag_text)
def test_any_text_is_written_one_way_everywhere(job: str, node: str) -> None:
    written = writable_tag_value(job)
    try:
        accepted = codec.checked_tag_value(job, "train_step", "job") == job
    except PointError:
        accepted = False
    assert accepted == (written == job)
    assert_one_escaping(job, node)


class RecordingTransport:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def send(self, body: bytes) -> SendResult:
        self.lines += body.decode().split("\n")
        return SendResult(204)

    def close(self) -> None:
        pass


def test_the_writer_sends_frames_as_the_codec_writes_their_points(tmp_path: Path) -> None:
    nodes = [*WRITABLE, *UNWRITABLE]
    frame = Frame(
        "host",
        np.arange(len(nodes), dtype=np.int64),
        {"cluster": np.array(["c"] * len(nodes), dtype=object),
         "node": np.array(nodes, dtype=object)},
        {"load1": np.linspace(0.0, 1.0, len(nodes))},
    )  # fmt: skip
    by_frames, by_points = RecordingTransport(), RecordingTransport()
    with Writer("http://x", "t", "o", "b", tmp_path / "frames", transport=by_frames) as writer:
        writer.write_frames([frame])
    with Writer("http://x", "t", "o", "b", tmp_path / "points", transport=by_points) as other:
        other.write(frame.points())
    assert by_frames.lines == by_points.lines
    assert by_frames.lines == [encode(p) for p in frame.points() if p.tags["node"] in WRITABLE]
    assert writer.stats.rejected == other.stats.rejected == len(UNWRITABLE)
    # The frame path refuses each value for the codec's reason, not a looser one of its own.
    assert writer.stats.rejected_by_reason == other.stats.rejected_by_reason


@pytest.mark.influx
def test_influxdb_stores_the_values_that_went_in(
    influx: InfluxServer, influx_bucket: str, tmp_path: Path
) -> None:
    values = [*WRITABLE, *UNWRITABLE]
    sink = http_sink(influx.url, influx.token, influx.org, influx_bucket)
    for number, value in enumerate(values):
        hook = TrainingHook(
            job=value, rank=number, world_size=len(values), cluster="hostile", node=f"n{number}",
            sink=sink, env={}, flush_interval_s=60.0,
        )  # fmt: skip
        hook.step()
        hook.event("nccl_timeout", "x")
        hook.close()
        assert hook.stats.sent_lines == 4 and hook.stats.send_errors == 0
    frame = Frame(
        "host",
        np.arange(len(WRITABLE), dtype=np.int64),
        {"cluster": np.array(["hostile"] * len(WRITABLE), dtype=object),
         "node": np.array(WRITABLE, dtype=object)},
        {"load1": np.linspace(0.0, 1.0, len(WRITABLE))},
    )  # fmt: skip
    with Writer(influx.url, influx.token, influx.org, influx_bucket, tmp_path) as w:
        w.write_frames([frame])
    stored = influx.query_rows(f'from(bucket: "{influx_bucket}") |> range(start: 0)')
    jobs = {row["rank"]: row["job"] for row in stored if row["_measurement"] == "train_step"}
    assert jobs == {str(n): writable_tag_value(v) for n, v in enumerate(values)}
    event_jobs = {row["_value"] for row in stored if row["_field"] == "job"}
    assert event_jobs == set(jobs.values())
    assert {row["node"] for row in stored if row["_measurement"] == "host"} == set(WRITABLE)
