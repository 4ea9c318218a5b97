"""A webhook relay: the alert tasks post to it, it posts to the real endpoint safely.

Flux's ``http.post`` follows redirects to any host (a 307 re-sends the payload there) and
cannot be told not to. Run this relay on the InfluxDB host and give its URL to
``reflex alerts install --webhook-url``: it forwards each post with a timeout, follows a
redirect only within the endpoint's own scheme and host, and answers InfluxDB with the
endpoint's status, or 502 when the endpoint failed or tried to send the payload elsewhere
(so the task run fails visibly).

It takes a body only with a ``Content-Length`` of at most ``MAX_BODY_BYTES`` (411, 400 or 413
otherwise: a length of -1 once read the socket to its end), and is served by
:class:`~influx.guarded_http.GuardedServer`: a few worker threads, a connection cap, header and
body timeouts, abuse logged once per kind.

>>> relay = WebhookRelay("https://hooks.example.com/T000/B000")
>>> relay.url.startswith("http://127.0.0.1:")
True
>>> relay.close()
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from reflex_localize.influx.guarded_http import GuardedHandler, GuardedServer

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
        self,
        forward_url: str,
        host: str = "127.0.0.1",
        port: int = 0,
        timeout_s: float = 10.0,
        *,
        max_connections: int = 32,  # alert tasks post one at a time; a few at once at most
        header_timeout_s: float = 5.0,
    ) -> None:
        if urlsplit(forward_url).scheme not in ("http", "https"):
            raise ValueError("the forward URL must be http or https")
        self.forward_url, self.timeout_s, self._host = forward_url, timeout_s, host
        self.max_connections, self.header_timeout_s = max_connections, header_timeout_s
        self.forwarded = self.refused = self.failed = 0
        self._opener = urllib.request.build_opener(_SameHostRedirects())
        self._server = GuardedServer(
            self._handler(), host=host, port=port, name="webhook relay", workers=4,
            max_connections=max_connections, header_timeout_s=header_timeout_s,
            body_timeout_s=header_timeout_s, idle_timeout_s=30.0,
        ).start()  # fmt: skip

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self._server.port}/"

    def close(self) -> None:
        self._server.stop()

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

    def _handler(self) -> type[GuardedHandler]:
        relay = self

        class Handler(GuardedHandler):
            def do_POST(self) -> None:
                length = self.headers.get("Content-Length")
                if length is None or not length.isascii() or not length.isdigit():
                    self._answer(411 if length is None else 400, close=True)
                    return
                if int(length) > MAX_BODY_BYTES:
                    self._answer(413, close=True)
                    return
                self.expect_body()
                body = self.rfile.read(int(length))
                if len(body) < int(length):
                    self._answer(400, close=True)
                    return
                status = relay.forward(body, self.headers.get("Content-Type", "application/json"))
                self._answer(status)

            def _answer(self, status: int, *, close: bool = False) -> None:
                self.close_connection = self.close_connection or close  # its body is unread
                self.send_response(status)
                self.send_header("Content-Length", "0")
                if self.close_connection:
                    self.send_header("Connection", "close")
                self.end_headers()

            def log_message(self, *args: Any) -> None:  # the endpoint URL may hold a secret
                pass

        return Handler
