"""A small HTTP endpoint for operators: ``/healthz`` and Prometheus ``/metrics``.

The agent and the flow each run one (``collectors/agent_metrics.py``, ``flows/flow_metrics.py``
say what they report). ``/healthz`` answers 200 ``ok`` while ``check()`` returns ``None``, and
503 with its reason otherwise (not started yet, a loop or a writer stuck), so a Kubernetes
probe or a systemd watchdog script can act on it. ``/metrics`` is the registry in Prometheus'
text format, gathered at scrape time: nothing is computed between scrapes. The server runs in
a daemon thread and never touches the caller's loop; every request has a timeout.

``/livez`` answers from ``live`` instead (default: ``check``), for a liveness probe that
should restart only what a restart can fix: a hung loop, not an InfluxDB that is away.

>>> from prometheus_client import CollectorRegistry
>>> server = HealthServer(("127.0.0.1", 0), lambda: None, CollectorRegistry())
>>> server.start()
>>> import urllib.request
>>> urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5).read()
b'ok\\n'
>>> server.stop()
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

HealthCheck = Callable[[], "str | None"]  # None: healthy; else why not


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``:PORT`` (all interfaces) or ``PORT`` (loopback).

    >>> parse_address("9101"), parse_address(":9101"), parse_address("10.0.0.1:9101")
    (('127.0.0.1', 9101), ('0.0.0.0', 9101), ('10.0.0.1', 9101))
    """
    host, sep, port = text.rpartition(":")
    if not sep:
        host = "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r}: expected HOST:PORT, :PORT or PORT")
    return host or "0.0.0.0", int(port)


class HealthServer:
    """Serves ``/healthz`` from ``check`` and ``/metrics`` from ``registry``; see the module."""

    def __init__(
        self,
        address: tuple[str, int],
        check: HealthCheck,
        registry: CollectorRegistry,
        live: HealthCheck | None = None,
    ) -> None:
        self.check, self.registry, self.live = check, registry, live or check
        self._server = ThreadingHTTPServer(address, _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="reflex-health", daemon=True
        )
        self._thread.start()
        log.info("health and metrics on http://%s:%d/", *self._server.server_address[:2])

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def health(self, check: HealthCheck | None = None) -> tuple[int, bytes]:
        try:
            problem = (check or self.check)()
        except Exception as error:  # a broken check is itself unhealthy, not a dead server
            problem = f"health check failed: {error!r}"
        return (200, b"ok\n") if problem is None else (503, f"{problem}\n".encode())


def _handler(server: HealthServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = 10  # a client that never sends its request does not hold a thread

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path in ("/healthz", "/livez"):
                status, body = server.health(server.live if path == "/livez" else None)
                content_type = "text/plain; charset=utf-8"
            elif path == "/metrics":
                status, body = 200, generate_latest(server.registry)
                content_type = CONTENT_TYPE_LATEST
            else:
                status, body = 404, b"try /healthz, /livez or /metrics\n"
                content_type = "text/plain; charset=utf-8"
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("health server: " + format, *args)  # scrapes every 15 s: not INFO

    return Handler
