"""The training hook's way to its node's agent: datagrams on a local Unix socket, or the same
datagrams over TCP to the agent's node-local port (pods that may not mount the socket).

Standard library only (the hook runs inside every training job). A datagram is one header
line, then lines of line protocol:

    #reflex-hook v1 dropped=N
    train_step,cluster=c1,job=j1,node=n1,rank=0 step=1i,step_time_seconds=0.5 1700000000000000000

``dropped`` is how many records the hook lost since its previous datagram got through (its
queue full, or the agent away longer than its retry buffer lasts), so the agent can count
them in its self-metrics. Datagrams keep each batch whole and need no connection: a hook that
starts before the agent, or outlives an agent restart, just sends again at its next flush.

:class:`SocketSink` never blocks: the socket is non-blocking, so an absent agent
(``FileNotFoundError``, ``ConnectionRefusedError``) or a full one (``BlockingIOError``) fails
the send at once, and the hook keeps the unsent lines in its bounded retry buffer.

:class:`TcpSink` sends the same datagrams to ``REFLEX_HOOK_ADDRESS`` (``host:port``; in
Kubernetes the node's ``status.hostIP`` and the agent's port), each framed by its length in
4 bytes, big-endian. It connects on the hook's own thread with a short timeout, and on any
error drops the connection (a half-sent frame is discarded by the agent) and keeps the lines.

>>> import socket, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "hook.sock")
>>> agent = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); agent.bind(path)
>>> SocketSink(path).send_lines(["train_step,cluster=c,job=j,node=n,rank=0 step=1i 1"], 0)
1
>>> parse_datagram(agent.recv(MAX_DATAGRAM_BYTES))
(0, ['train_step,cluster=c,job=j,node=n,rank=0 step=1i 1'])
"""

from __future__ import annotations

import errno
import socket
import struct
import time
from collections.abc import Mapping

DEFAULT_HOOK_SOCKET = "/run/reflex/hook.sock"
SOCKET_ENV = "REFLEX_HOOK_SOCKET"
ADDRESS_ENV = "REFLEX_HOOK_ADDRESS"  # host:port of the agent's TCP listener (both ends)
FRAME = struct.Struct("!I")  # a TCP frame's length prefix
TCP_TIMEOUT_S = 0.2  # connect and send, on the hook's thread
HEADER = "#reflex-hook v1 dropped="
# Well under Linux's default socket send buffer (net.core.wmem_default, 208 KiB), which bounds
# one AF_UNIX datagram: a bigger one fails with EMSGSIZE however empty the receiver is.
MAX_DATAGRAM_BYTES = 60_000
# A full agent queue is retried for up to FULL_WAIT_S per flush before the lines go back to
# the hook's retry buffer: a burst (a restart's backlog) drains at the agent's pace.
FULL_RETRY_S, FULL_WAIT_S = 0.001, 0.05


class BadDatagram(ValueError):
    """A datagram that is not this protocol (no header, a bad count, not UTF-8)."""


def socket_path(env: Mapping[str, str]) -> str:
    return env.get(SOCKET_ENV) or DEFAULT_HOOK_SOCKET


def parse_datagram(payload: bytes) -> tuple[int, list[str]]:
    """(records the sender dropped, its lines); raises BadDatagram."""
    try:
        text = payload.decode()
    except UnicodeDecodeError as error:
        raise BadDatagram(f"not UTF-8: {error}") from None
    header, _, body = text.partition("\n")
    count = header[len(HEADER) :] if header.startswith(HEADER) else ""
    if not count.isascii() or not count.isdigit():
        raise BadDatagram(f"no {HEADER!r} header: {header[:80]!r}")
    return int(count), [line for line in body.split("\n") if line]


def parse_address(text: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port``; raises ValueError.

    >>> parse_address("10.0.0.7:9103"), parse_address("[fd00::7]:9103")
    (('10.0.0.7', 9103), ('fd00::7', 9103))
    """
    host, colon, port = text.strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not colon or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"expected host:port, got {text!r}")
    return host, int(port)


class SocketSink:
    """Sends the hook's lines to the agent's socket at ``path``; see the module docstring."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.last_error = ""
        self.dropped_oversized = 0
        self._reported_drops = 0
        self._socket: socket.socket | None = None

    def __repr__(self) -> str:
        return f"SocketSink({self.path!r})"

    def _send(self, payload: bytes) -> None:
        self._sock().sendto(payload, self.path)

    def send_lines(self, lines: list[str], dropped_total: int) -> int:
        """Sends ``lines`` in as few datagrams as fit; returns how many lines went.

        Stops at the first datagram refused, so the caller keeps the rest in order. A line too
        long for any datagram is dropped here (retrying it cannot succeed) and reported with
        the hook's own drops."""
        sent, waited = 0, 0.0
        while sent < len(lines):
            dropped = dropped_total + self.dropped_oversized
            end, payload = self._datagram(lines, sent, dropped - self._reported_drops)
            try:
                self._send(payload)
            except BlockingIOError as error:  # the agent's queue is full: it reads it fast
                self.last_error = f"BlockingIOError: {error}"
                if waited >= FULL_WAIT_S:
                    return sent
                time.sleep(FULL_RETRY_S)  # on the hook's own thread, never the training one
                waited += FULL_RETRY_S
                continue
            except OSError as error:
                self.last_error = f"{type(error).__name__}: {error}"
                self._broken()
                if error.errno == errno.EMSGSIZE and end == sent + 1:
                    self.dropped_oversized += 1
                    sent = end
                    continue
                return sent
            self._reported_drops = dropped
            sent = end
        return sent

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def _broken(self) -> None:
        """After a failed send: a datagram socket stays usable."""

    def _sock(self) -> socket.socket:
        if self._socket is None:
            self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._socket.setblocking(False)
        return self._socket

    @staticmethod
    def _datagram(lines: list[str], start: int, dropped: int) -> tuple[int, bytes]:
        """(the end of the lines that fit after ``start``, at least one, and the payload)."""
        parts = [f"{HEADER}{max(dropped, 0)}\n".encode()]
        size, end = len(parts[0]), start
        while end < len(lines):
            encoded = (lines[end] + "\n").encode()
            if end > start and size + len(encoded) > MAX_DATAGRAM_BYTES:
                break
            parts.append(encoded)
            size += len(encoded)
            end += 1
        return end, b"".join(parts)


class TcpSink(SocketSink):
    """The same datagrams to the agent's TCP listener at ``host:port``, length-framed.

    >>> server = socket.create_server(("127.0.0.1", 0))
    >>> sink = TcpSink("127.0.0.1:%d" % server.getsockname()[1])
    >>> sink.send_lines(["train_step,cluster=c,job=j,node=n,rank=0 step=1i 1"], 0)
    1
    >>> connection, _ = server.accept()
    >>> size = FRAME.unpack(connection.recv(4))[0]
    >>> parse_datagram(connection.recv(size))
    (0, ['train_step,cluster=c,job=j,node=n,rank=0 step=1i 1'])
    >>> sink.close(); connection.close(); server.close()
    """

    def __init__(self, address: str) -> None:
        super().__init__(address)
        self.host, self.port = parse_address(address)

    def __repr__(self) -> str:
        return f"TcpSink({self.path!r})"

    def _send(self, payload: bytes) -> None:
        if len(payload) > MAX_DATAGRAM_BYTES:  # as the socket would: this line cannot go
            raise OSError(errno.EMSGSIZE, "record longer than a hook datagram")
        if self._socket is not None and _closed_by_peer(self._socket):
            self.close()  # the agent restarted: a send would vanish into the old connection
        if self._socket is None:
            self._socket = socket.create_connection((self.host, self.port), TCP_TIMEOUT_S)
        self._socket.sendall(FRAME.pack(len(payload)) + payload)

    def _broken(self) -> None:
        self.close()  # the agent discards a half-sent frame; the next send reconnects


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the agent closed this connection (it never writes to it: anything readable is
    its end of file, or an error)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
