"""An HTTP(S) server that holds under abuse: idle sockets cost a file, not a thread.

``http.server.ThreadingHTTPServer`` gives every connection a thread for its whole life and
(with TLS) runs the handshake inside ``accept()``: one silent TLS client stopped the push
endpoint, and 3,000 idle connections made 2,974 threads and 90,000 lines of tracebacks
(issue 40). Here:

* one thread waits on every socket at once (``selectors``): the listening one, TLS handshakes
  (non-blocking, each with ``handshake_timeout_s``) and idle keep-alive connections (each
  closed after ``idle_timeout_s``);
* a connection goes to a bounded pool of ``workers`` threads only once its request has begun
  to arrive, and comes back after each answer; its headers must all arrive within
  ``header_timeout_s`` of the first byte, and a body within ``body_timeout_s`` of its start;
* at most ``max_connections`` are open: past that the one idle the longest is closed to make
  room, so a flood of idle sockets churns itself and a real client still gets in;
* abuse is logged once per kind per ``log_interval_s`` with a count, never once per connection.

The handler class is a ``BaseHTTPRequestHandler`` as usual; it calls ``self.expect_body()``
before reading a body, to start the body's clock.

>>> from http.server import BaseHTTPRequestHandler
>>> class Hello(GuardedHandler):
...     def do_GET(self):
...         self.send_response(204); self.send_header("Content-Length", "0"); self.end_headers()
>>> server = GuardedServer(Hello, port=0).start()
>>> import http.client
>>> c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
>>> c.request("GET", "/"); c.getresponse().status
204
>>> c.close(); server.stop()
"""

from __future__ import annotations

import contextlib
import io
import logging
import queue
import selectors
import socket
import ssl
import threading
import time
from collections import Counter, OrderedDict
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler

_log = logging.getLogger(__name__)


class AbuseLog:
    """Counts abuse by kind; logs a kind's first occurrence, then at most once an interval
    with how many came since (``kind`` is a fixed phrase, never a client's words)."""

    def __init__(self, logger: logging.Logger, interval_s: float = 60.0) -> None:
        self.logger, self.interval_s = logger, interval_s
        self.counts: Counter[str] = Counter()
        self._unlogged: Counter[str] = Counter()
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def __call__(self, kind: str) -> None:
        now = time.monotonic()
        with self._lock:
            self.counts[kind] += 1
            self._unlogged[kind] += 1
            if now - self._last.get(kind, -self.interval_s) < self.interval_s:
                return
            self._last[kind], count = now, self._unlogged.pop(kind)
        self.logger.warning("%s: %d connection(s) in the last %.0f s", kind, count,
                            self.interval_s)  # fmt: skip


class _Clocked(io.RawIOBase):
    """The socket's bytes, each read given what is left of the current deadline; ``waiting``
    off means 'only what is there already' (the buffer's, not the socket's)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.deadline, self.waiting = sock, float("inf"), True

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int | None:  # type: ignore[override]
        if not self.waiting:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline passed")
        self.sock.settimeout(left)
        return self.sock.recv_into(buffer)


class _Writer(io.BufferedIOBase):
    """What BaseHTTPRequestHandler writes answers to: the socket, each write bounded."""

    def __init__(self, sock: socket.socket, timeout_s: float) -> None:
        self.sock, self.timeout_s = sock, timeout_s

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.sock.settimeout(self.timeout_s)
        self.sock.sendall(data)
        return len(data)


class _Connection:
    def __init__(self, sock: socket.socket, address: tuple, handshaking: bool) -> None:
        self.sock, self.address, self.handshaking = sock, address, handshaking
        self.deadline = 0.0
        self.raw = _Clocked(sock)
        self.rfile = io.BufferedReader(self.raw)
        self.served = 0


class GuardedHandler(BaseHTTPRequestHandler):
    """A request handler run by :class:`GuardedServer`, one request per call."""

    server: GuardedServer  # type: ignore[assignment]
    connection_state: _Connection
    protocol_version = "HTTP/1.1"

    def __init__(self, state: _Connection, server: GuardedServer) -> None:  # no super(): no loop
        self.connection_state, self.server = state, server
        self.request = self.connection = state.sock
        self.client_address = state.address
        self.rfile, self.wfile = state.rfile, _Writer(state.sock, server.write_timeout_s)
        self.close_connection = True

    def expect_body(self) -> None:
        """Starts the body's clock (the headers' stops)."""
        self.connection_state.raw.deadline = time.monotonic() + self.server.body_timeout_s
        self._phase = "body"

    def serve_one(self) -> None:
        self._phase = "headers"
        self.connection_state.raw.deadline = time.monotonic() + self.server.header_timeout_s
        self.handle_one_request()

    def log_error(self, format: str, *args: object) -> None:
        if format.startswith("Request timed out"):
            self.server.abuse(f"{self._phase} too slow (over {self._timeout():.0f} s)")
        else:
            self.server.abuse("malformed requests")
        self.log_message(format, *args)

    def log_message(self, format: str, *args: object) -> None:
        _log.debug("%s: " + format, self.server.name, *args)

    def _timeout(self) -> float:
        server = self.server
        return server.body_timeout_s if self._phase == "body" else server.header_timeout_s


class GuardedServer:
    """See the module docstring. ``handler`` is a :class:`GuardedHandler` subclass."""

    def __init__(
        self,
        handler: type[GuardedHandler],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
        name: str = "http server",
        workers: int = 8,
        max_connections: int = 512,
        handshake_timeout_s: float = 10.0,
        header_timeout_s: float = 10.0,
        body_timeout_s: float = 120.0,
        idle_timeout_s: float = 120.0,
        write_timeout_s: float = 30.0,
        log_interval_s: float = 60.0,
    ) -> None:
        if workers < 1 or max_connections < 1:
            raise ValueError("need at least one worker and one connection")
        self.handler, self.ssl_context, self.name = handler, ssl_context, name
        self.host, self._port = host, port
        self.workers, self.max_connections = workers, max_connections
        self.handshake_timeout_s, self.header_timeout_s = handshake_timeout_s, header_timeout_s
        self.body_timeout_s, self.idle_timeout_s = body_timeout_s, idle_timeout_s
        self.write_timeout_s = write_timeout_s
        self.abuse = AbuseLog(_log, log_interval_s)
        self._listener: socket.socket | None = None
        self._waiting: OrderedDict[socket.socket, _Connection] = OrderedDict()  # oldest first
        self._open = 0  # waiting here, queued for or in a worker
        self._open_lock = threading.Lock()  # workers close connections too
        self._back: queue.SimpleQueue[_Connection] = queue.SimpleQueue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._pool: ThreadPoolExecutor | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    @property
    def port(self) -> int:
        return self._listener.getsockname()[1] if self._listener is not None else self._port

    @property
    def open_connections(self) -> int:
        return self._open

    def start(self) -> GuardedServer:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.create_server((self.host, self._port), family=family, backlog=1024)
        listener.setblocking(False)
        self._listener = listener
        self._selector.register(listener, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=f"{self.name} worker")
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stopping.set()
        self._wake_w.send(b"x")
        self._thread.join(timeout=5)
        self._thread = None
        assert self._pool is not None
        self._pool.shutdown(wait=False, cancel_futures=True)
        for connection in list(self._waiting.values()):
            self._close(connection)
        self._selector.close()
        if self._listener is not None:
            self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

    # ---- the waiting thread -----------------------------------------------------------------

    def _loop(self) -> None:
        swept = time.monotonic()
        while not self._stopping.is_set():
            for key, events in self._selector.select(timeout=0.25):
                try:
                    self._ready(key.fileobj, events)  # type: ignore[arg-type]
                except Exception:  # never the loop: one socket's trouble is its own
                    _log.exception("%s: a connection failed unexpectedly", self.name)
            now = time.monotonic()
            if now - swept >= 0.25:
                swept = now
                self._sweep(now)

    def _ready(self, sock: socket.socket, events: int) -> None:
        if sock is self._listener:
            self._accept()
        elif sock is self._wake_r:
            self._wake_r.recv(4096)
            while not self._back.empty():
                self._wait(self._back.get(), idle=True)
        else:
            connection = self._waiting.get(sock)
            if connection is None:  # closed earlier in this round (evicted to make room)
                return
            if connection.handshaking:
                self._handshake(connection)
            else:
                self._unwait(connection)
                self._dispatch(connection)

    def _accept(self) -> None:
        assert self._listener is not None
        for _ in range(64):  # a burst, but give the other sockets a turn
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # out of files: wait for some to close
                self.abuse(f"accept failed ({type(error).__name__})")
                return
            if self._open >= self.max_connections:
                self.abuse(f"over {self.max_connections} connections: closed the longest idle")
                if not self._evict():
                    sock.close()
                    continue
            with self._open_lock:
                self._open += 1
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.ssl_context is None:
                self._wait(_Connection(sock, address, handshaking=False), idle=False)
                continue
            wrapped = self.ssl_context.wrap_socket(
                sock, server_side=True, do_handshake_on_connect=False
            )
            connection = _Connection(wrapped, address, handshaking=True)
            connection.deadline = time.monotonic() + self.handshake_timeout_s
            self._waiting[wrapped] = connection
            self._selector.register(wrapped, selectors.EVENT_READ)
            self._handshake(connection)

    def _handshake(self, connection: _Connection) -> None:
        sock = connection.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._selector.modify(sock, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._selector.modify(sock, selectors.EVENT_WRITE)
            return
        except (ssl.SSLError, OSError):
            self.abuse("TLS handshakes failed")
            self._unwait(connection)
            self._close(connection)
            return
        connection.handshaking = False
        self._unwait(connection)
        if sock.pending():  # the request came with the handshake's last flight
            self._dispatch(connection)
        else:
            self._wait(connection, idle=False)

    def _wait(self, connection: _Connection, *, idle: bool) -> None:
        """Waits for the connection's next request: ``idle`` after an answer (keep-alive)."""
        if self._stopping.is_set():
            self._close(connection)
            return
        timeout = self.idle_timeout_s if idle else self.header_timeout_s
        connection.deadline = time.monotonic() + timeout
        connection.sock.setblocking(False)
        self._waiting[connection.sock] = connection
        self._selector.register(connection.sock, selectors.EVENT_READ)

    def _unwait(self, connection: _Connection) -> None:
        self._selector.unregister(connection.sock)
        del self._waiting[connection.sock]

    def _evict(self) -> bool:
        for connection in self._waiting.values():  # the longest waiting first
            self._unwait(connection)
            self._close(connection)
            return True
        return False

    def _sweep(self, now: float) -> None:
        for connection in [c for c in self._waiting.values() if c.deadline <= now]:
            if connection.handshaking:
                self.abuse(f"TLS handshakes not done in {self.handshake_timeout_s:.0f} s")
            elif connection.served == 0:
                self.abuse(f"connections silent for {self.header_timeout_s:.0f} s")
            self._unwait(connection)
            self._close(connection)

    def _close(self, connection: _Connection) -> None:
        with self._open_lock:
            self._open -= 1
        with contextlib.suppress(OSError):
            connection.sock.close()

    def _dispatch(self, connection: _Connection) -> None:
        assert self._pool is not None
        try:
            self._pool.submit(self._serve, connection)
        except RuntimeError:  # the pool is shut down: stopping
            self._close(connection)

    # ---- a worker ---------------------------------------------------------------------------

    def _serve(self, connection: _Connection) -> None:
        """Answers the connection's requests while they are already there, then hands it back
        to the waiting thread (or closes it)."""
        keep = False
        try:
            while True:
                handler = self.handler(connection, self)
                handler.serve_one()
                connection.served += 1
                keep = not handler.close_connection and not self._stopping.is_set()
                if not keep or not self._has_more(connection):
                    break
        except Exception as error:  # a reset, a TLS alert, a handler's own failure
            keep = False
            self.abuse(f"requests failed ({type(error).__name__})")
            _log.debug("%s: request failed", self.name, exc_info=True)
        if keep:
            self._back.put(connection)
            with contextlib.suppress(OSError):  # stopped meanwhile
                self._wake_w.send(b"x")
        else:
            self._close(connection)

    @staticmethod
    def _has_more(connection: _Connection) -> bool:
        """Whether the next request is here already (pipelined into the buffer, or decrypted
        and held by TLS), where waiting on the socket would not see it."""
        connection.raw.waiting = False
        try:
            buffered = connection.rfile.peek(1)
        finally:
            connection.raw.waiting = True
        sock = connection.sock
        return bool(buffered) or (isinstance(sock, ssl.SSLSocket) and sock.pending() > 0)
