"""A real HTTP server on 127.0.0.1 that records what InfluxDB's alert tasks post to it.

It is the webhook *target* of the tasks under test, not a stand-in for InfluxDB: the tasks
run inside the real influxd and reach it over loopback.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Behaviour:
    """How the receiver answers: a status, an optional redirect, an optional delay."""

    status: int = 200
    location: str | None = None
    delay_s: float = 0.0
    received: list[Received] = field(default_factory=list)


class WebhookReceiver:
    def __init__(self, host: str = "127.0.0.1", behaviour: Behaviour | None = None) -> None:
        self.behaviour = behaviour or Behaviour()
        self._server = ThreadingHTTPServer((host, 0), _handler(self.behaviour))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[0], self._server.server_address[1]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}/hook"

    @property
    def received(self) -> list[Received]:
        return self.behaviour.received

    def wait_for(self, count: int, timeout_s: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + timeout_s
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return list(self.received)

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(behaviour: Behaviour) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {key.lower(): value for key, value in self.headers.items()}
            behaviour.received.append(Received(self.command, self.path, headers, body))
            time.sleep(behaviour.delay_s)
            self.send_response(behaviour.status)
            if behaviour.location:
                self.send_header("Location", behaviour.location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_GET = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler
