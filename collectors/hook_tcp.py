"""The agent's TCP listener for training hooks: length-framed datagrams (4 bytes, big-endian,
then the same payload as on the socket; :class:`~collectors.hook_socket.TcpSink`), read on a
thread of its own and handed to ``receive`` with the peer's address. A frame longer than any
datagram is not this protocol: the connection is dropped and counted; a half-sent frame is
discarded with its connection. At most ``MAX_CONNECTIONS`` at once (one per training process).

>>> import socket
>>> from reflex_localize.collectors.hook_socket import FRAME
>>> got = []
>>> listener = TcpListener("127.0.0.1:0", lambda payload, sender: got.append(payload),
...                        lambda reason, detail: None)
>>> listener.start()
>>> with socket.create_connection(("127.0.0.1", listener.port)) as hook:
...     hook.sendall(FRAME.pack(5) + b"hello")
>>> import time; time.sleep(0.3); listener.stop()
>>> got
[b'hello']
"""

from __future__ import annotations

import selectors
import socket
import threading
from collections.abc import Callable

from reflex_localize.collectors.hook_senders import Sender
from reflex_localize.collectors.hook_socket import FRAME, MAX_DATAGRAM_BYTES, parse_address

MAX_CONNECTIONS = 1024
NOT_A_DATAGRAM = "malformed: not a hook datagram"
TOO_MANY = "refused: too many hook connections"


class TcpListener:
    """Listens at ``host:port``; ``receive(payload, sender)`` for each frame, ``count(reason,
    detail)`` for each connection refused or dropped."""

    def __init__(
        self,
        address: str,
        receive: Callable[[bytes, Sender], None],
        count: Callable[[str, str], None],
    ) -> None:
        host, port = parse_address(address)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.create_server((host, port), family=family, backlog=128)
        self._listener.setblocking(False)
        self._receive, self._count = receive, count
        self._buffers: dict[socket.socket, bytearray] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reflex-hook-tcp", daemon=True)

    @property
    def port(self) -> int:
        """The port listened on (the one the kernel chose for port 0)."""
        return int(self._listener.getsockname()[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._listener.close()

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ)
        try:
            while not self._stop.is_set():
                for key, _ in selector.select(timeout=0.2):
                    if key.fileobj is self._listener:
                        self._accept(selector)
                    else:
                        self._read(selector, key.fileobj)  # type: ignore[arg-type]
        finally:
            for connection in self._buffers:
                connection.close()
            self._buffers.clear()
            selector.close()

    def _accept(self, selector: selectors.BaseSelector) -> None:
        try:
            connection, peer = self._listener.accept()
        except OSError:
            return
        if len(self._buffers) >= MAX_CONNECTIONS:
            self._count(TOO_MANY, str(peer))
            connection.close()
            return
        connection.setblocking(False)
        self._buffers[connection] = bytearray()
        selector.register(connection, selectors.EVENT_READ)

    def _read(self, selector: selectors.BaseSelector, connection: socket.socket) -> None:
        try:
            chunk = connection.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        buffer = self._buffers[connection]
        buffer += chunk
        sender = Sender(address=_peer(connection))
        while chunk and len(buffer) >= FRAME.size:
            size = FRAME.unpack_from(buffer)[0]
            if size > MAX_DATAGRAM_BYTES:
                self._count(NOT_A_DATAGRAM, f"{sender}: frame of {size} B")
                chunk = b""  # not this protocol: drop the connection
                break
            if len(buffer) < FRAME.size + size:
                break
            payload = bytes(buffer[FRAME.size : FRAME.size + size])
            del buffer[: FRAME.size + size]
            self._receive(payload, sender)
        if not chunk:  # closed (a half-sent frame is discarded), or not this protocol
            selector.unregister(connection)
            del self._buffers[connection]
            connection.close()


def _peer(connection: socket.socket) -> str:
    try:
        host, port = connection.getpeername()[:2]
    except OSError:
        return "tcp"
    return f"{host}:{port}"
