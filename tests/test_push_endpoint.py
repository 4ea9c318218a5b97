"""The push source's write endpoint on bad input: a wrong token gets 401 and nothing enters;
a malformed line goes to the error stream with its reason and the rest of its batch is kept;
an oversized body, a body that says gzip and is not, or a gzip bomb gets a clear 4xx; a batch
sent twice is counted once."""

from __future__ import annotations

import gzip
import http.client
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from reflex_localize.flows.io.push_receiver import PushReceiver
from reflex_localize.flows.io.push_source import PushPartition, PushSource
from reflex_localize.flows.messages import shard_of
from reflex_localize.influx.config import InfluxSettings

WINDOW_NS = 10 * 10**9
T0 = 1_767_225_600 * 10**9  # a window boundary
TOKEN = "push-token-for-tests"
LINE = "host,cluster=c,node=n{n} load1={v} {t}"
PUSH_SETTINGS = tuple(
    f"REFLEX_PUSH_{name}"
    for name in ("TOKEN", "TOKEN_FILE", "LISTEN", "TLS_CERT", "TLS_KEY", "REPLAY")
)


@pytest.fixture
def endpoint() -> Iterator[tuple[PushSource, PushPartition, dict[str, int]]]:
    now = {"ns": T0 - 20 * 10**9}
    # The first lines pushed are for an open window: the stream is live at once, from before
    # T0, so no window needs the backfill (InfluxDB is not there, and it is never asked).
    settings = InfluxSettings(url="http://127.0.0.1:9", bucket="telemetry", token="unused")
    source = PushSource(
        settings,
        push_token=TOKEN,
        port=0,
        n_shards=1,
        start_ns=T0,
        max_body_bytes=64_000,
        clock=lambda: now["ns"],
    )
    part = source.build_part("in", "shard-0", None)
    source.start_receiving()  # as the first next_batch does
    yield source, part, now
    part.close()


def post(
    source: PushSource,
    body: bytes,
    *,
    token: str = TOKEN,
    gzipped: bool = True,
    query: str = "bucket=telemetry&org=0123456789abcdef",
) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", source.receiver.port, timeout=10)
    headers = {"Authorization": f"Token {token}"}
    if gzipped:
        headers["Content-Encoding"] = "gzip"
    connection.request("POST", f"/api/v2/write?{query}", body=body, headers=headers)
    response = connection.getresponse()
    answer = (response.status, response.read().decode())
    connection.close()
    return answer


def lines(*texts: str) -> bytes:
    return gzip.compress("\n".join(texts).encode())


def closed_batches(part: PushPartition, now: dict[str, int]) -> list:
    now["ns"] = T0 + WINDOW_NS + 6 * 10**9  # the first window closed (lag 5 s)
    return part.next_batch()


def test_a_wrong_token_gets_401_and_nothing_enters(endpoint) -> None:
    source, part, now = endpoint
    status, body = post(source, lines(LINE.format(n=1, v=0.5, t=T0 + 1)), token="not-it")
    assert status == 401 and "unauthorized" in body
    assert post(source, lines(LINE.format(n=1, v=0.5, t=T0 + 1)), token="")[0] == 401
    assert closed_batches(part, now) == [] and part.stats.lines == 0


def test_a_malformed_line_is_an_error_and_the_rest_of_its_batch_is_kept(endpoint) -> None:
    source, part, now = endpoint
    good = [LINE.format(n=n, v=0.5, t=T0 + n) for n in (1, 2, 3)]
    bad = f"host,cluster=c,node=n9 load1=oops {T0}"
    status, _ = post(source, lines(good[0], bad, *good[1:]))
    assert status == 204
    assert post(source, lines("host,cluster=c,node=n4 load1=0.5 yesterday"))[0] == 204
    (batch,) = closed_batches(part, now)
    assert sorted(batch.frames[0].tags["node"].tolist()) == ["n1", "n2", "n3"]
    reasons = sorted(error.reason for error in batch.errors)
    assert len(reasons) == 2 and "timestamp_not_plain_ns" in reasons
    detail = next(e.detail for e in batch.errors if e.reason != "timestamp_not_plain_ns")
    assert "request 1 line 2" in detail


def test_oversized_not_gzip_and_gzip_bombs_get_clear_4xx(endpoint) -> None:
    source, part, now = endpoint
    big = "\n".join(LINE.format(n=i, v=0.5, t=T0 + i) for i in range(3000)).encode()
    status, body = post(source, big, gzipped=False)
    assert status == 413 and "over the limit" in body
    status, body = post(source, b"host,cluster=c,node=n1 load1=1 1", gzipped=True)
    assert status == 400 and "not" in body and "gzip" in body
    bomb = gzip.compress(b"#" * 30_000_000)  # 29 kB that inflate to 30 MB
    source.receiver.max_inflated_bytes = 10_000_000
    status, body = post(source, bomb)
    assert status == 413 and "inflates" in body
    one = lines(LINE.format(n=1, v=1, t=T0))
    assert post(source, one, query="bucket=other")[0] == 404
    assert post(source, one, query="bucket=telemetry&precision=s")[0] == 400
    assert closed_batches(part, now) == [] and part.stats.lines == 0


def test_a_batch_sent_twice_is_counted_once_and_a_late_line_is_an_error(endpoint) -> None:
    source, part, now = endpoint
    batch_body = lines(*(LINE.format(n=n, v=0.5, t=T0 + n) for n in (1, 2)))
    assert post(source, batch_body)[0] == 204
    assert post(source, batch_body)[0] == 204  # the stream did not get the first answer
    (batch,) = closed_batches(part, now)
    assert len(batch.frames[0]) == 2 and not batch.errors
    assert post(source, batch_body)[0] == 204  # once more, after its window closed
    assert post(source, lines(LINE.format(n=7, v=0.5, t=T0 + 5)))[0] == 204
    now["ns"] += WINDOW_NS
    (late,) = part.next_batch()
    assert [e.reason for e in late.errors] == ["late"]
    assert part.stats.duplicates == 4


def test_a_chunked_gzip_body_is_taken_whole(endpoint) -> None:
    source, part, now = endpoint
    body = lines(*(LINE.format(n=n, v=0.5, t=T0 + n) for n in range(1, 201)))
    connection = http.client.HTTPConnection("127.0.0.1", source.receiver.port, timeout=10)
    headers = {"Authorization": f"Token {TOKEN}", "Content-Encoding": "gzip"}
    pieces = (body[i : i + 97] for i in range(0, len(body), 97))  # as InfluxDB sends it
    connection.request(
        "POST", "/api/v2/write?bucket=telemetry", pieces, headers, encode_chunked=True
    )
    assert connection.getresponse().status == 204
    connection.close()
    (batch,) = closed_batches(part, now)
    assert len(batch.frames[0]) == 200 and not batch.errors


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl for a test certificate")
def test_tls_where_configured(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    received: list[list[str]] = []
    receiver = PushReceiver(lambda got, label: received.append(got), token=TOKEN, port=0,
                            ssl_context=server_side).start()  # fmt: skip
    try:
        assert receiver.url.startswith("https://")
        client_side = ssl.create_default_context(cafile=str(cert))
        connection = http.client.HTTPSConnection(
            "127.0.0.1", receiver.port, timeout=10, context=client_side
        )
        headers = {"Authorization": f"Token {TOKEN}", "Content-Encoding": "gzip"}
        connection.request("POST", "/api/v2/write", lines("a,node=n1 x=1 1"), headers)
        assert connection.getresponse().status == 204
        connection.close()
        # Plain HTTP to the TLS port is not answered as a write.
        plain = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=10)
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            plain.request("POST", "/api/v2/write", lines("a,node=n1 x=2 2"), headers)
            plain.getresponse()
        assert received == [["a,node=n1 x=1 1"]]
    finally:
        receiver.stop()


def test_a_line_of_unknown_shard_lands_in_its_own_shard_once() -> None:
    now = {"ns": T0 - 20 * 10**9}
    settings = InfluxSettings(url="http://127.0.0.1:9", bucket="telemetry", token="unused")
    source = PushSource(settings, push_token=TOKEN, port=0, n_shards=2, start_ns=T0,
                        clock=lambda: now["ns"])  # fmt: skip
    parts = [source.build_part("in", f"shard-{i}", None) for i in range(2)]
    source.start_receiving()
    try:
        escaped = "host,cluster=c,node=n\\ 1 load1=0.5 " + str(T0 + 1)  # read only by decoding
        plain = [LINE.format(n=n, v=0.5, t=T0 + 2) for n in range(6)]
        broken = "host,cluster=c,node=n\\ 2 load1=x " + str(T0 + 3)
        assert post(source, lines(escaped, *plain, broken))[0] == 204
        now["ns"] = T0 + WINDOW_NS + 6 * 10**9
        batches = [batch for part in parts for batch in part.next_batch()]
        nodes = sorted(n for b in batches for f in b.frames for n in f.tags["node"].tolist())
        assert nodes == sorted(["n 1", *(f"n{n}" for n in range(6))])
        assert len([e for b in batches for e in b.errors]) == 1  # counted by shard 0 alone
        assert all(b.shard == f"shard-{shard_of_any(b)}" for b in batches if b.frames)
    finally:
        for part in parts:
            part.close()


def shard_of_any(batch) -> int:
    owners = {shard_of(str(n), 2) for f in batch.frames for n in f.tags["node"].tolist()}
    assert len(owners) == 1
    return owners.pop()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "needs the flow's own push token"),
        ({"REFLEX_PUSH_TOKEN": "t", "REFLEX_PUSH_LISTEN": "8087"}, "expected HOST:PORT"),
        ({"REFLEX_PUSH_TOKEN": "t", "REFLEX_PUSH_TLS_CERT": "c.pem"}, "go together"),
    ],
)
def test_reflex_flow_stops_on_a_push_mistake_in_one_line(
    env: dict[str, str], message: str, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from reflex_localize.shell.flow import command

    args = ["--source", "influx-push", "--sink", "files", "--out", str(tmp_path)]
    args += ["--influx-url", "http://127.0.0.1:9"]
    empty = {
        key: "" for key in ("REFLEX_PUSH_TOKEN", "REFLEX_PUSH_TOKEN_FILE", "REFLEX_PUSH_LISTEN")
    }
    result = CliRunner().invoke(command, args, env={**empty, "REFLEX_INFLUX_TOKEN": "x", **env})
    assert result.exit_code == 2 and message in result.output, result.output
