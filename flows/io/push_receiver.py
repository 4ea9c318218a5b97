"""The endpoint an InfluxDB replication stream writes to: the v2 write API, and nothing more.

InfluxDB forwards each write to the replicated bucket as ``POST
/api/v2/write?bucket=B&org=O`` with ``Authorization: Token T``, a gzip body of line protocol
with nanosecond stamps, sent chunked; it counts only ``204`` as done, and retries anything else
(``Retry-After`` honoured on 429). An empty body without ``Content-Encoding`` is its check that
the remote answers.

What this receiver answers, and why:

* ``401`` when the token is not the flow's own (compared in constant time), before the body is
  read: nothing of that request enters the flow.
* ``404`` for another path or bucket, ``405`` for another method, ``400`` for a precision other
  than ``ns`` (the stream always sends ns; anything else is a client mistake).
* ``413`` when the body, or what it inflates to, passes its limit (a gzip bomb included);
  ``400`` when it says gzip and is not; ``415`` for an encoding it does not know; ``411`` with
  neither a length nor chunks.
* ``204`` once the lines are handed to ``deliver``. A malformed line is the flow's to count in
  its error stream (with its reason), not a reason to refuse the batch: InfluxDB accepted it
  already and would resend a refused batch forever.

The connection is closed after every refusal, so an unread body cannot be taken for the next
request. Connections are served by :class:`~influx.guarded_http.GuardedServer`: TLS
handshakes off the accept loop with a timeout, header and body timeouts, a connection cap and
a bounded pool of threads, and abuse logged once per kind per minute, so idle or silent
clients cannot stop the endpoint (issue 40).

>>> received = []
>>> receiver = PushReceiver(lambda lines, label: received.append(lines), token="t", port=0)
>>> receiver.start().port > 0
True
>>> receiver.stop()
"""

from __future__ import annotations

import hmac
import logging
import ssl
import threading
import zlib
from collections import Counter
from collections.abc import Callable
from itertools import count
from urllib.parse import parse_qs, urlsplit

from reflex_localize.influx.guarded_http import AbuseLog, GuardedHandler, GuardedServer

_log = logging.getLogger(__name__)

WRITE_PATH = "/api/v2/write"
# InfluxDB's replication batches are about 500 kB of line protocol before gzip; leave room.
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_INFLATED_BYTES = 256 * 1024 * 1024
# InfluxDB's replication keeps one connection per stream; a few hundred is room for any fleet's
# streams and the probes. Past it the longest idle connection is closed for a new one.
DEFAULT_MAX_CONNECTIONS = 512
_READ_CHUNK = 1 << 16

Deliver = Callable[[list[str], str], None]


class Refused(Exception):
    """A request the receiver answers with ``status`` and ``message`` (a 4xx)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class PushReceiver:
    """An HTTP(S) server for the v2 write API that hands each request's lines to ``deliver``.

    ``deliver(lines, label)`` runs in the request's thread; ``label`` names the request in
    reject details (``request 17``). ``bucket``, when given, is the only bucket accepted.
    ``stats`` counts answers by status code.
    """

    def __init__(
        self,
        deliver: Deliver,
        *,
        token: str,
        host: str = "127.0.0.1",
        port: int = 8087,
        bucket: str | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        workers: int = 8,
        header_timeout_s: float = 10.0,
        body_timeout_s: float = 120.0,
    ) -> None:
        if not token:
            raise ValueError("the push receiver needs a token of its own")
        self.deliver, self.bucket = deliver, bucket
        self.host, self._port = host, port
        self.max_body_bytes, self.max_inflated_bytes = max_body_bytes, max_inflated_bytes
        self._token = token.encode()
        self._ssl_context = ssl_context
        self._server: GuardedServer | None = None
        self._abuse: AbuseLog | None = None  # kept after stop
        self._guard = {
            "max_connections": max_connections, "workers": workers,
            "header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s,
        }  # fmt: skip
        self._numbers = count(1)
        self.stats: Counter[int] = Counter()
        self._stats_lock = threading.Lock()

    def __repr__(self) -> str:  # the token stays out
        return f"PushReceiver(host={self.host!r}, port={self._port})"

    @property
    def port(self) -> int:
        return self._server.port if self._server is not None else self._port

    @property
    def abuse(self) -> Counter[str]:
        """Connections refused or closed for abuse, by kind (idle, slow, failed TLS...)."""
        return Counter(self._abuse.counts) if self._abuse is not None else Counter()

    @property
    def url(self) -> str:
        scheme = "https" if self._ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    def start(self) -> PushReceiver:
        server = GuardedServer(
            _handler_for(self), host=self.host, port=self._port, ssl_context=self._ssl_context,
            name="push receiver", **self._guard,  # type: ignore[arg-type]
        )  # fmt: skip
        self._server, self._abuse = server.start(), server.abuse
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    # ---- one request ----------------------------------------------------------------------

    def authorized(self, header: str | None) -> bool:
        scheme, _, given = (header or "").partition(" ")
        if scheme not in ("Token", "Bearer"):
            return False
        return hmac.compare_digest(given.strip().encode(), self._token)

    def check_query(self, query: str) -> None:
        params = parse_qs(query)
        bucket = params.get("bucket", [""])[0]
        if self.bucket is not None and bucket != self.bucket:
            raise Refused(404, f'bucket "{bucket}" not found (this flow takes "{self.bucket}")')
        precision = params.get("precision", ["ns"])[0]
        if precision != "ns":
            raise Refused(400, f"precision {precision!r} is not supported; send ns")

    def inflate(self, body: bytes, encoding: str) -> bytes:
        encoding = encoding.strip().lower()
        if encoding in ("", "identity"):
            return body
        if encoding != "gzip":
            raise Refused(415, f"Content-Encoding {encoding!r} is not supported (gzip or none)")
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip framing only
        try:
            data = inflater.decompress(body, self.max_inflated_bytes + 1)
        except zlib.error as error:
            raise Refused(400, f"the body says gzip but is not: {error}") from None
        if len(data) > self.max_inflated_bytes:
            raise Refused(413, f"the body inflates past {self.max_inflated_bytes} bytes")
        if not inflater.eof:
            raise Refused(400, "the gzip body is truncated")
        return data

    def label(self) -> str:
        return f"request {next(self._numbers)}"

    def count(self, status: int) -> None:
        with self._stats_lock:
            self.stats[status] += 1


def _handler_for(receiver: PushReceiver) -> type[GuardedHandler]:
    class Handler(_WriteHandler):
        pass

    Handler.receiver = receiver
    return Handler


class _WriteHandler(GuardedHandler):
    receiver: PushReceiver  # keep-alive (HTTP/1.1): the stream reuses its connection

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/health":
            self._answer(200, '{"status":"pass"}')
        elif path == "/ping":  # as InfluxDB's: a bare 204 (a 204 has no body)
            self._answer(204, "")
        else:
            self._refuse(Refused(404, f"{path}: not found"))

    def do_POST(self) -> None:
        receiver = self.receiver
        try:
            parts = urlsplit(self.path)
            if parts.path != WRITE_PATH:
                raise Refused(404, f"{parts.path}: not found (the write API is {WRITE_PATH})")
            if not receiver.authorized(self.headers.get("Authorization")):
                raise Refused(401, "unauthorized: not this flow's push token")
            receiver.check_query(parts.query)
            body = self._body()
            data = receiver.inflate(body, self.headers.get("Content-Encoding", ""))
        except Refused as refusal:
            self._refuse(refusal)
            return
        if data:
            text = data.decode("utf-8", errors="replace")  # a bad byte fails its line, later
            lines = [line.rstrip("\r") for line in text.split("\n")]
            receiver.deliver([line for line in lines if line and not line.startswith("#")],
                             receiver.label())  # fmt: skip
        self._answer(204, "")

    def do_PUT(self) -> None:
        self._refuse(Refused(405, "method not allowed (POST)"))

    do_DELETE = do_PATCH = do_PUT

    def _body(self) -> bytes:
        limit = self.receiver.max_body_bytes
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._chunked(limit)
        length = self.headers.get("Content-Length")
        if length is None:
            raise Refused(411, "a body needs Content-Length or chunked transfer encoding")
        if not length.isdigit():
            raise Refused(400, f"Content-Length {length[:40]!r} is not a number")
        if int(length) > limit:
            raise Refused(413, f"the body ({length[:40]} bytes) is over the limit of {limit} bytes")
        self.expect_body()
        body = self.rfile.read(int(length))
        if len(body) < int(length):
            raise Refused(400, f"the body ended after {len(body)} of {length} bytes")
        return body

    def _chunked(self, limit: int) -> bytes:
        parts: list[bytes] = []
        total = 0
        self.expect_body()
        while True:
            size_line = self.rfile.readline(1024).split(b";", 1)[0].strip()
            if not size_line or not all(c in b"0123456789abcdefABCDEF" for c in size_line):
                raise Refused(400, f"bad chunk size {size_line[:40]!r}")
            size = int(size_line, 16)
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers, up to the blank line
                    pass
                return b"".join(parts)
            total += size
            if total > limit:
                raise Refused(413, f"the body is over the limit of {limit} bytes")
            parts.append(self.rfile.read(size))
            self.rfile.readline(16)  # the chunk's CRLF

    def _refuse(self, refusal: Refused) -> None:
        self.close_connection = True  # its body may be unread
        code = {400: "invalid", 401: "unauthorized", 404: "not found", 413: "request too large"}
        kind = code.get(refusal.status, "invalid")
        message = refusal.message.replace("\\", "\\\\").replace('"', '\\"')
        self._answer(refusal.status, f'{{"code":"{kind}","message":"{message}"}}')

    def _answer(self, status: int, body: str) -> None:
        self.receiver.count(status)
        data = body.encode()
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if data:
            self.wfile.write(data)
