"""The writer's error classes, bounds and spool, driven by a scripted transport and a fake clock.

These cover what the real InfluxDB cannot be made to answer on demand (413, 429 with
Retry-After, a long run of 503s); tests/test_writer_influx.py covers the real thing.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reflex_localize.influx.spool import Spool, SpoolLockedError
from reflex_localize.influx.write_transport import NO_RESPONSE, SendResult, parse_retry_after
from reflex_localize.influx.writer import Writer
from reflex_localize.schemas.codec import Point

Answer = Callable[[list[str]], SendResult]


class ScriptedTransport:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.bodies: list[list[str]] = []
        self.delivered: list[str] = []

    def send(self, body: bytes) -> SendResult:
        lines = body.decode().split("\n")
        self.bodies.append(lines)
        result = self.answer(lines)
        if result.ok:
            self.delivered.extend(lines)
        return result

    def close(self) -> None:
        pass


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def accept(lines: list[str]) -> SendResult:
    return SendResult(204)


def unreachable(lines: list[str]) -> SendResult:
    return SendResult(NO_RESPONSE, "ConnectionRefusedError")


def point(step: int) -> Point:
    return Point("host", {"cluster": "c", "node": "n"}, {"procs_running": step}, step)


def steps(lines: list[str]) -> list[int]:
    return [int(line.rsplit(" ", 1)[1]) for line in lines]


def make(tmp_path, answer: Answer, fake: FakeTime | None = None, **options) -> Writer:
    fake = fake or FakeTime()
    transport = ScriptedTransport(answer)
    return Writer(
        "http://test", "token", "org", "bucket", tmp_path / "spool",
        transport=transport, clock=fake.clock, sleep=fake.sleep, **options,
    )  # fmt: skip


def test_a_413_splits_the_batch_until_the_pieces_fit(tmp_path):
    def at_most_three(lines: list[str]) -> SendResult:
        return SendResult(204) if len(lines) <= 3 else SendResult(413, "too large")

    writer = make(tmp_path, at_most_three, batch_size=10)
    writer.write(point(i) for i in range(10))
    assert writer.flush()
    transport = writer._transport
    assert isinstance(transport, ScriptedTransport)
    assert steps(transport.delivered) == list(range(10))
    assert writer.stats.sent == 10 and writer.stats.rejected == 0


def test_bad_lines_are_isolated_dropped_and_counted_while_the_rest_land(tmp_path):
    def refuse_sevens(lines: list[str]) -> SendResult:
        if any(step % 7 == 0 for step in steps(lines)):
            return SendResult(400, "unable to parse")
        return SendResult(204)

    writer = make(tmp_path, refuse_sevens, batch_size=50)
    writer.write(point(i) for i in range(1, 50))
    assert writer.flush()
    transport = writer._transport
    assert isinstance(transport, ScriptedTransport)
    assert steps(transport.delivered) == [i for i in range(1, 50) if i % 7]
    assert writer.stats.rejected_by_reason == {"HTTP 400: unable to parse": 7}
    assert writer.stats.retried == 0


def test_429_waits_at_least_retry_after_then_delivers(tmp_path):
    answers = iter([SendResult(429, "slow down", retry_after_s=7.0)])
    fake = FakeTime()
    writer = make(tmp_path, lambda lines: next(answers, SendResult(204)), fake)
    writer.write([point(1)])
    assert writer.flush(wait_s=30)
    assert sum(fake.sleeps) >= 7.0
    assert writer.stats.retried == 1 and writer.stats.sent == 1


def test_backoff_grows_while_the_server_stays_down(tmp_path):
    fake = FakeTime()
    writer = make(tmp_path, lambda lines: SendResult(503, "unavailable"), fake)
    writer.write([point(1)])
    assert not writer.flush(wait_s=20)
    assert fake.sleeps == sorted(fake.sleeps) and fake.sleeps[-1] > 2 * fake.sleeps[0]
    assert writer.stats.spooled == 1 and not writer.spool_empty


def test_an_undeliverable_flush_spools_and_a_new_writer_replays_in_order(tmp_path):
    writer = make(tmp_path, unreachable, batch_size=100)
    writer.write(point(i) for i in range(1000))
    assert not writer.close(wait_s=5)
    assert writer.stats.spooled == 1000
    replayer = make(tmp_path, accept, batch_size=100)
    replayer.write(point(i) for i in range(1000, 1100))
    assert replayer.close()
    transport = replayer._transport
    assert isinstance(transport, ScriptedTransport)
    assert steps(transport.delivered) == list(range(1100))
    assert replayer.stats.replayed == 1000


def test_memory_stays_bounded_while_the_server_is_down(tmp_path):
    writer = make(tmp_path, unreachable, batch_size=100, max_buffer_points=500)
    for start in range(0, 20_000, 250):
        writer.write(point(i) for i in range(start, start + 250))
        assert writer.backlog <= 500
    assert writer.stats.spooled >= 19_500


def test_a_full_spool_drops_its_oldest_segment_counts_it_and_keeps_the_newest(tmp_path):
    writer = make(tmp_path, unreachable, batch_size=100, max_spool_bytes=20_000)
    writer.write(point(i) for i in range(2000))
    writer.flush(wait_s=0)
    dropped = writer.stats.dropped_spool_full
    assert dropped > 0
    writer.close(wait_s=0)
    replayer = make(tmp_path, accept, batch_size=100, max_spool_bytes=20_000)
    assert replayer.close()
    transport = replayer._transport
    assert isinstance(transport, ScriptedTransport)
    assert steps(transport.delivered) == list(range(dropped, 2000))


def test_auth_errors_raise_and_keep_the_batch(tmp_path):
    from reflex_localize.influx.writer import WriterAuthError

    writer = make(tmp_path, lambda lines: SendResult(403, "forbidden"), batch_size=10)
    with pytest.raises(WriterAuthError):
        writer.write(point(i) for i in range(25))  # raised when the first batch is sent
    assert not writer.spool_empty and writer.backlog == 0  # on disk, should the process die
    with pytest.raises(WriterAuthError):
        writer.flush()


def test_a_torn_last_spool_line_is_dropped(tmp_path):
    spool = Spool(tmp_path)
    spool.append(["host,cluster=c,node=n load1=1 1"])
    spool.close()
    segment_path = next(tmp_path.glob("segment-*"))
    with segment_path.open("a") as handle:
        handle.write("host,cluster=c,node=n lo")  # a kill in the middle of an append
    spool = Spool(tmp_path)
    segment = spool.oldest()
    assert segment is not None and segment.lines == ["host,cluster=c,node=n load1=1 1"]


def test_two_writers_cannot_share_a_spool(tmp_path):
    first = Spool(tmp_path)
    with pytest.raises(SpoolLockedError):
        Spool(tmp_path)
    first.close()
    Spool(tmp_path).close()


@pytest.mark.parametrize(
    "header, seconds",
    [("7", 7.0), ("0", 0.0), (None, None), ("soon", None), ("99999", 3600.0)],
)
def test_retry_after_is_parsed_as_seconds(header, seconds):
    assert parse_retry_after(header) == seconds


def test_retry_after_as_an_http_date():
    from email.utils import formatdate
    from time import time

    parsed = parse_retry_after(formatdate(time() + 30, usegmt=True))
    assert parsed is not None and 25 <= parsed <= 31
