"""The push endpoint and the webhook relay under abuse (issue 40).

One idle TLS client used to stop the push endpoint (its handshake ran inside ``accept()``), and
3,000 idle plain connections made 2,974 threads and 90,000 lines of tracebacks. Now idle sockets
wait in one thread, requests are served by a bounded pool, every phase has a timeout, the
connection count is capped, and abuse is logged once per kind. (``benchmarks/push_abuse.py``
runs the same with 3,000 connections.)
"""

from __future__ import annotations

import http.client
import logging
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reflex_localize.dashboards.webhook_relay import MAX_BODY_BYTES, WebhookRelay
from reflex_localize.flows.io.push_receiver import PushReceiver

TOKEN = "push-token-for-tests"
IDLE = 300


def _ping_seconds(port: int, context: ssl.SSLContext | None = None) -> float:
    started = time.monotonic()
    if context is None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    else:
        connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)
    connection.request("GET", "/ping")
    assert connection.getresponse().status == 204
    connection.close()
    return time.monotonic() - started


def _idle(port: int, count: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(count)]


def _wait_until(condition: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return bool(condition())


def _closed(sock: socket.socket, timeout_s: float) -> bool:
    """Whether the peer closed ``sock`` within ``timeout_s`` (what it sent first is read)."""
    sock.settimeout(timeout_s)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except OSError:
        return True
    return True


@pytest.fixture
def receiver() -> Iterator[PushReceiver]:
    server = PushReceiver(
        lambda lines, label: None, token=TOKEN, port=0, header_timeout_s=0.5, body_timeout_s=0.5
    ).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("needs openssl for a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def test_ping_answers_fast_beside_hundreds_of_idle_connections_on_few_threads() -> None:
    threads_before = threading.active_count()
    server = PushReceiver(lambda lines, label: None, token=TOKEN, port=0, workers=4).start()
    idle = _idle(server.port, IDLE)
    try:
        assert _wait_until(lambda: server._server.open_connections == IDLE)  # type: ignore[union-attr]
        slowest = max(_ping_seconds(server.port) for _ in range(20))
        assert slowest < 1.0
        # One waiting thread and at most four workers, however many sockets are open.
        assert threading.active_count() - threads_before <= 1 + 4
    finally:
        for sock in idle:
            sock.close()
        server.stop()


def test_a_silent_tls_client_stops_nothing(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    client_side = ssl.create_default_context(cafile=str(cert))
    server = PushReceiver(
        lambda lines, label: None, token=TOKEN, port=0, ssl_context=server_side
    ).start()
    silent = _idle(server.port, 1 + IDLE // 3)  # no handshake, ever
    half = socket.create_connection(("127.0.0.1", server.port))
    half.sendall(b"\x16\x03\x01\x00\xff")  # the start of a ClientHello, then nothing
    try:
        # A server the silent clients held would not answer before the ping's 5 s timeout; on
        # two cores busy with the rest of the suite a handshake took up to about a second.
        assert max(_ping_seconds(server.port, client_side) for _ in range(5)) < 2.5
    finally:
        for sock in [*silent, half]:
            sock.close()
        server.stop()


def test_tls_handshakes_that_never_finish_are_closed_and_logged_once(
    certificate: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    cert, key = certificate
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    receiver = PushReceiver(lambda lines, label: None, token=TOKEN, port=0,
                            ssl_context=server_side)  # fmt: skip
    receiver._guard["handshake_timeout_s"] = 0.3
    server = receiver.start()
    with caplog.at_level(logging.WARNING):
        silent = _idle(server.port, 20)
        try:
            assert all(_closed(sock, 3.0) for sock in silent)
        finally:
            for sock in silent:
                sock.close()
    server.stop()
    assert server.abuse["TLS handshakes not done in 0 s"] == 20
    assert len([r for r in caplog.records if "TLS handshakes" in r.getMessage()]) == 1


def test_slow_headers_and_slow_bodies_are_cut_off(receiver: PushReceiver) -> None:
    silent, slow_headers, slow_body = _idle(receiver.port, 3)
    slow_headers.sendall(b"POST /api/v2/write HTTP/1.1\r\nHost: x\r\n")
    slow_body.sendall(
        b"POST /api/v2/write HTTP/1.1\r\nAuthorization: Token " + TOKEN.encode()
        + b"\r\nContent-Length: 100\r\n\r\nhost,node=n"
    )  # fmt: skip
    try:
        assert _closed(silent, 2.0) and _closed(slow_headers, 2.0) and _closed(slow_body, 2.0)
    finally:
        for sock in (silent, slow_headers, slow_body):
            sock.close()
    abuse = receiver.abuse
    assert abuse["connections silent for 0 s"] == 1
    assert abuse["headers too slow (over 0 s)"] == 1
    assert abuse["body too slow (over 0 s)"] == 1
    assert _ping_seconds(receiver.port) < 1.0


def test_over_the_cap_the_longest_idle_connection_makes_room(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = PushReceiver(lambda lines, label: None, token=TOKEN, port=0,
                          max_connections=50).start()  # fmt: skip
    with caplog.at_level(logging.WARNING):
        idle = _idle(server.port, 120)
        try:
            assert _ping_seconds(server.port) < 1.0
            assert server._server.open_connections <= 50  # type: ignore[union-attr]
            assert _closed(idle[0], 2.0) and not _closed(idle[-1], 0.2)
        finally:
            for sock in idle:
                sock.close()
            server.stop()
    assert server.abuse["over 50 connections: closed the longest idle"] >= 70
    capped = [r for r in caplog.records if "over 50 connections" in r.getMessage()]
    assert len(capped) == 1


@pytest.mark.parametrize(
    "head, status",
    [
        (b"Content-Length: -1\r\n", 400),
        (b"Content-Length: 99999999999999999999999\r\n", 413),
        (b"Transfer-Encoding: chunked\r\n", 400),  # its chunk size below is -5
    ],
)
def test_a_body_length_that_lies_is_refused(
    receiver: PushReceiver, head: bytes, status: int
) -> None:
    sock = socket.create_connection(("127.0.0.1", receiver.port), timeout=5)
    sock.sendall(
        b"POST /api/v2/write HTTP/1.1\r\nAuthorization: Token " + TOKEN.encode() + b"\r\n"
        + head + b"\r\n-5\r\nxxxxx\r\n0\r\n\r\n"
    )  # fmt: skip
    answer = sock.recv(4096).decode()
    sock.close()
    assert answer.startswith(f"HTTP/1.1 {status} ")


def test_keep_alive_still_serves_request_after_request(receiver: PushReceiver) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=5)
    for _ in range(5):
        connection.request("GET", "/ping")
        response = connection.getresponse()
        assert response.status == 204 and response.read() == b""
    connection.close()
    assert receiver.stats[204] == 5


# -- the webhook relay -------------------------------------------------------------------------


@pytest.fixture
def relay() -> Iterator[WebhookRelay]:
    with WebhookRelay("http://127.0.0.1:9/hook", timeout_s=0.5) as running:
        yield running


@pytest.mark.parametrize(
    "length, status", [("-1", 400), ("x", 400), (str(MAX_BODY_BYTES + 1), 413), ("", 411)]
)
def test_the_relay_refuses_a_body_it_cannot_bound(
    relay: WebhookRelay, length: str, status: int
) -> None:
    port = int(relay.url.rsplit(":", 1)[1].rstrip("/"))
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    header = f"Content-Length: {length}\r\n" if length else ""
    sock.sendall(f"POST / HTTP/1.1\r\nHost: x\r\n{header}\r\n".encode() + b"{}" * 10)
    answer = sock.recv(4096).decode()
    sock.close()
    assert answer.startswith(f"HTTP/1.0 {status} ") or answer.startswith(f"HTTP/1.1 {status} ")
    assert relay.forwarded == relay.failed == 0


def test_the_relay_cuts_off_a_silent_client_and_caps_its_connections(
    relay: WebhookRelay,
) -> None:
    port = int(relay.url.rsplit(":", 1)[1].rstrip("/"))
    idle = _idle(port, 80)
    try:
        assert sum(_closed(sock, 0.05) for sock in idle) >= 80 - relay.max_connections
        started = time.monotonic()
        assert _closed(idle[-1], relay.header_timeout_s + 2)
        assert time.monotonic() - started < relay.header_timeout_s + 2
    finally:
        for sock in idle:
            sock.close()
