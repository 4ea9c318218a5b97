"""A webhook relay: the alert tasks post to it, it posts to the real endpoint safely.

Flux's ``http.post`` follows redirects to any host (a 307 re-sends the payload there) and
cannot be told not to. Run this relay on the InfluxDB host and give its URL to
``reflex alerts install --webhook-url``: it forwards each post with a timeout, follows a
redirect only within the endpoint's own scheme and host, and answers InfluxDB with the
endpoint's status, or 502 when the endpoint failed or tried to send the payload elsewhere
(so the task run fails visibly).

>>> relay = WebhookRelay("https://hooks.example.com/T000/B000")
>>> relay.url.startswith("http://127.0.0.1:")
True
>>> relay.close()
"""

from __future__ import annotations

import logging
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_log = logging.getLogger(__name__)
MAX_BODY_BYTES = 1 << 20


class _SameHostRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only when it stays on the original scheme and host."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        old, new = urlsplit(req.full_url), urlsplit(newurl)
        if (old.scheme, old.netloc) != (new.scheme, new.netloc):
            raise urllib.error.HTTPError(
                req.full_url,
                code,
                f"refused a redirect to another host ({new.netloc})",
                headers,
                fp,
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class WebhookRelay:
    def __init__(
        self, forward_url: str, host: str = "127.0.0.1", port: int = 0, timeout_s: float = 10.0
    ) -> None:
        if urlsplit(forward_url).scheme not in ("http", "https"):
            raise ValueError("the forward URL must be http or https")
        self.forward_url, self.timeout_s, self._host = forward_url, timeout_s, host
        self.forwarded = self.refused = self.failed = 0
        self._opener = urllib.request.build_opener(_SameHostRedirects())
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self._server.server_address[1]}/"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> WebhookRelay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def forward(self, body: bytes, content_type: str) -> int:
        """Posts one payload; returns the status to give InfluxDB."""
        request = urllib.request.Request(
            self.forward_url, data=body, method="POST", headers={"Content-Type": content_type}
        )
        try:
            with self._opener.open(request, timeout=self.timeout_s) as answer:
                self.forwarded += 1
                return int(answer.status)
        except urllib.error.HTTPError as error:
            if "another host" in str(error.msg):
                self.refused += 1
                _log.error("webhook endpoint redirected to another host: payload not sent")
                return 502
            self.failed += 1
            return int(error.code) if error.code >= 400 else 502
        except (urllib.error.URLError, TimeoutError, OSError) as error:
            self.failed += 1
            _log.error("webhook endpoint unreachable: %s", type(error).__name__)
            return 502

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = min(int(self.headers.get("Content-Length", 0)), MAX_BODY_BYTES)
                body = self.rfile.read(length)
                status = relay.forward(body, self.headers.get("Content-Type", "application/json"))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:  # the endpoint URL may hold a secret
                pass

        return Handler
