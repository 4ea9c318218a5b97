"""A fault-injecting HTTP proxy between a client (the Writer) and the real influxd.

Each request the proxy reads takes the next fault from its script, then the script is empty,
requests pass through untouched. Faults:

- ``"pass"``: forward the request and relay the answer;
- ``("slow", seconds)``: wait, then forward (longer than the client's timeout: the client gives
  up while the server may still store the batch, so the retry is a duplicate send);
- ``500``: answer 500 without forwarding;
- ``(429, retry_after_s)``: answer 429 Too Many Requests with ``Retry-After``;
- ``"cut"``: read half of the body, then close the connection without an answer;
- ``"cut_after"``: forward the whole request (InfluxDB stores it), then close without an
  answer: the client cannot know the batch landed.

``fail_all`` answers 503 to everything until cleared (InfluxDB down, for spool tests).

>>> proxy = FaultProxy("http://127.0.0.1:1")  # doctest: +SKIP
>>> proxy.script.extend([500, (429, 1.0), "cut"])  # doctest: +SKIP
"""

from __future__ import annotations

import http.client
import socket
import socketserver
import threading
import time
from collections import Counter, deque
from typing import Any
from urllib.parse import urlsplit

Fault = Any  # "pass" | "cut" | "cut_after" | 500 | (429, float) | ("slow", float)


class FaultProxy:
    def __init__(self, upstream_url: str) -> None:
        parts = urlsplit(upstream_url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.script: deque[Fault] = deque()
        self.fail_all = False
        self.seen: Counter[str] = Counter()  # fault name -> requests it was applied to
        self._lock = threading.Lock()
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                proxy._serve_connection(self.connection, self.rfile)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _next_fault(self) -> Fault:
        with self._lock:
            if self.fail_all:
                return 503
            return self.script.popleft() if self.script else "pass"

    def _serve_connection(self, connection: socket.socket, reader: Any) -> None:
        while True:
            request = _read_request(reader)
            if request is None:
                return
            method, path, headers, length = request
            fault = self._next_fault()
            if fault == "cut":
                reader.read(length // 2)  # mid-batch: half the body is in, then the line drops
                self.seen["cut"] += 1
                connection.shutdown(socket.SHUT_RDWR)
                return
            body = reader.read(length) if length else b""
            name = (
                fault
                if isinstance(fault, str)
                else str(fault[0] if isinstance(fault, tuple) else fault)
            )
            self.seen[name] += 1
            if isinstance(fault, int):
                _answer(connection, fault, b'{"code":"internal error","message":"injected"}')
                continue
            if isinstance(fault, tuple) and fault[0] == 429:
                _answer(connection, 429, b'{"code":"too many requests"}', f"{fault[1]:g}")
                continue
            if isinstance(fault, tuple) and fault[0] == "slow":
                time.sleep(fault[1])
            status, reason, answer_headers, answer = self._forward(method, path, headers, body)
            if fault == "cut_after":
                connection.shutdown(socket.SHUT_RDWR)
                return
            try:
                _relay(connection, status, reason, answer_headers, answer)
            except OSError:
                return  # the client gave up (timeout) while we were slow

    def _forward(
        self, method: str, path: str, headers: list[tuple[str, str]], body: bytes
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        upstream = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            upstream.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for key, value in headers:
                upstream.putheader(key, value)
            upstream.endheaders(body)
            response = upstream.getresponse()
            return response.status, response.reason, response.getheaders(), response.read()
        finally:
            upstream.close()


def _read_request(reader: Any) -> tuple[str, str, list[tuple[str, str]], int] | None:
    """Request line and headers; the body (its length given) is left to read."""
    try:
        line = reader.readline()
        if not line:
            return None
        method, path, _ = line.decode("latin-1").split(" ", 2)
        headers = []
        while (header := reader.readline()) not in (b"\r\n", b"\n", b""):
            key, _, value = header.decode("latin-1").partition(":")
            headers.append((key.strip(), value.strip()))
        length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
        return method, path, headers, length
    except (OSError, ValueError):
        return None


def _answer(connection: socket.socket, status: int, body: bytes, retry_after: str = "") -> None:
    extra = [("Retry-After", retry_after)] if retry_after else []
    reason = http.client.responses.get(status, "")
    _relay(connection, status, reason, [("Content-Type", "application/json"), *extra], body)


def _relay(
    connection: socket.socket,
    status: int,
    reason: str,
    headers: list[tuple[str, str]],
    body: bytes,
) -> None:
    skip = {"content-length", "transfer-encoding", "connection"}
    head = [f"HTTP/1.1 {status} {reason}"]
    head += [f"{k}: {v}" for k, v in headers if k.lower() not in skip]
    head += [f"Content-Length: {len(body)}", "", ""]
    connection.sendall("\r\n".join(head).encode("latin-1") + body)
