"""The agent's end of the training hooks' socket: receives, checks and stamps their records.

Training jobs on this node send datagrams (:mod:`collectors.hook_socket`) to a Unix socket the
agent binds (``[collect].hook_socket``, ``REFLEX_HOOK_SOCKET``, default
``/run/reflex/hook.sock``, mode 0666: jobs run as their users, and a local user can at worst
write training records for this node). A thread of its own reads them; :meth:`collect`, run by
the agent every ``interval_s``, hands over what arrived, so hook records are batched, journaled
and written with the agent's own points, and the job needs no token.

Every line is decoded against the schema. Only ``train_step``, ``job_membership`` and training
``event`` points are taken; ``cluster`` and ``node`` become the agent's own (the agent knows
its node; a hook in a container may not). What is refused is counted by reason in
:attr:`HookReceiver.parse_errors`, which the agent adds to this collector's ``errors``, with
records lost on the way: dropped by the hooks themselves (their queue full, or the agent away
past their retry buffer; each datagram says how many) or by a full receive buffer here.

**TCP.** With ``[collect].hook_address`` or ``REFLEX_HOOK_ADDRESS`` (``host:port``, the node's
own address: pods reach it at ``status.hostIP``) the receiver also accepts the same datagrams
over TCP, length-framed (:class:`~collectors.hook_socket.TcpSink`), token-free and checked
exactly as the socket's. Pod Security "baseline" allows it where it forbids a hostPath socket.

**Who sends.** On the socket every datagram comes with its sender's pid, uid and gid
(``SO_PASSCRED``: the kernel's word, not the sender's). A job belongs to the first user that
sends for it (remembered for the last ``MAX_JOBS`` jobs, logged once with the pid); records
for it from another user are refused. Where the sender's cgroup names its Slurm job
(``/proc/<pid>/cgroup``: ``.../job_<id>/...``), a record for another job is refused. TCP
senders are known by address only. A training event is evidence: the flow never takes a
``source=training`` record (an XID a rank reports included) as a critical error on its own.

Without a socket to listen on (``reflex collect --once``) the collector is absent hardware;
a socket it cannot bind fails every run, with the reason.

>>> import tempfile, os
>>> from reflex_localize.collectors.hook_socket import SocketSink
>>> path = os.path.join(tempfile.mkdtemp(), "hook.sock")
>>> receiver = HookReceiver("c1", "n1", path=path)
>>> receiver.start_background(lambda points: None)
>>> line = "train_step,cluster=x,job=j,node=elsewhere,rank=0 step=1i 1700000000000000000"
>>> SocketSink(path).send_lines([line, "bogus"], 0)
2
>>> receiver.wait_for(2)
True
>>> [(p.tags["node"], p.fields) for p in receiver.collect(0)]
[('n1', {'step': 1})]
>>> receiver.parse_errors
{'malformed: bad_sections': 1}
>>> receiver.stop_background()
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import selectors
import socket
import stat
import struct
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reflex_localize.collectors.base import Emit, HardwareAbsent, base_tags
from reflex_localize.collectors.hook_socket import (
    ADDRESS_ENV,
    FRAME,
    MAX_DATAGRAM_BYTES,
    SOCKET_ENV,
    BadDatagram,
    parse_address,
    parse_datagram,
)
from reflex_localize.schemas.codec import Point, PointError, decode
from reflex_localize.schemas.contract import Schema, load_schema

if TYPE_CHECKING:
    from reflex_localize.collectors.settings import CollectSettings
    from reflex_localize.influx.config import Identity

log = logging.getLogger(__name__)

HOOK_MEASUREMENTS = ("train_step", "job_membership", "event")
SOCKET_MODE = 0o666
RECEIVE_BUFFER_BYTES = 4 << 20  # asked of the kernel; net.core.rmem_max may grant less
DROPPED_BY_HOOKS = "dropped: by hooks (queue full, or no agent past their retry buffer)"
DROPPED_HERE = "dropped: agent's receive queue full"
NOT_THE_SENDERS_JOB = "refused: job is not the sender's"
MAX_JOBS = 10_000  # jobs whose sending user is remembered
MAX_CONNECTIONS = 1024  # open TCP connections (one per training process)
_UCRED = struct.Struct("iII")  # struct ucred: pid, uid, gid
_SLURM_JOB = re.compile(r"/job_(\d+)(?:/|$)")


@dataclass(frozen=True)
class Sender:
    """Who sent a datagram: the kernel's pid/uid/gid on the socket, the peer address on TCP."""

    pid: int | None = None
    uid: int | None = None
    address: str = ""

    def __str__(self) -> str:
        return self.address or f"pid {self.pid} uid {self.uid}"


class HookReceiver:
    """Listens on the hooks' socket; see the module docstring."""

    name = "hook"

    def __init__(
        self,
        cluster: str,
        node: str,
        *,
        path: str,
        address: str = "",
        interval_s: float = 1.0,
        max_queued_points: int = 100_000,
        schema: Schema | None = None,
        proc_root: str = "/proc",
    ) -> None:
        self.path = path
        self.address = address  # host:port of the TCP listener, "" for none
        self.proc_root = proc_root
        self.owners: OrderedDict[str, Sender] = OrderedDict()  # job -> its first sender
        self._listener: socket.socket | None = None
        self._tcp_thread: threading.Thread | None = None
        self.interval_s = interval_s
        self.max_queued_points = max_queued_points
        self.parse_errors: dict[str, int] = {}  # refused and lost records, by reason
        self.received_lines = 0
        self._stamp = base_tags(cluster, node)
        self._schema = schema or load_schema()
        self._queue: deque[Point] = deque()
        self._socket: socket.socket | None = None
        self._bind_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._emit: Emit | None = None
        self._lock = threading.Lock()

    # -- the agent's side ---------------------------------------------------------------------

    def collect(self, now_ns: int) -> Iterator[Point]:
        if self._bind_error is not None:
            raise OSError(self._bind_error)
        if self._thread is None:
            raise HardwareAbsent(f"not listening on {self.path} (reflex collect --once)")
        for _ in range(len(self._queue)):
            yield self._queue.popleft()

    def start_background(self, emit: Emit) -> None:
        self._emit = emit
        where = self.path
        try:
            self._socket = self._bind()
            if self.address:
                where = self.address
                self._listener = _listen(self.address)
        except (OSError, ValueError) as error:
            self._bind_error = f"cannot listen for training hooks on {where}: {error}"
            log.error("%s", self._bind_error)
            if self._socket is not None:
                self._socket.close()
                self._socket = None
            return
        log.info("listening for training hooks on %s%s", self.path,
                 f" and tcp {self.address}" if self.address else "")  # fmt: skip
        self._thread = threading.Thread(target=self._run, name="reflex-hook-rx", daemon=True)
        self._thread.start()
        if self._listener is not None:
            tcp = threading.Thread(target=self._run_tcp, name="reflex-hook-tcp", daemon=True)
            tcp.start()
            self._tcp_thread = tcp

    @property
    def tcp_port(self) -> int | None:
        """The TCP port listened on (the one the kernel chose for port 0)."""
        return int(self._listener.getsockname()[1]) if self._listener is not None else None

    def stop_background(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._tcp_thread is not None:
            self._tcp_thread.join(timeout=5)
            self._tcp_thread = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        leftovers = [self._queue.popleft() for _ in range(len(self._queue))]
        if leftovers and self._emit is not None:  # what arrived since the last run
            self._emit(leftovers)
        if self._socket is not None:
            self._socket.close()
            self._socket = None
            with contextlib.suppress(OSError):  # removed by hand, or a new agent's already
                os.unlink(self.path)

    def wait_for(self, lines: int, timeout_s: float = 5.0) -> bool:
        """Until ``lines`` lines have arrived (for tests and the benchmark)."""
        deadline = time.monotonic() + timeout_s
        while self.received_lines < lines and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.received_lines >= lines

    # -- the receiving thread -----------------------------------------------------------------

    def _bind(self) -> socket.socket:
        folder = os.path.dirname(self.path) or "."
        os.makedirs(folder, mode=0o755, exist_ok=True)
        if os.path.exists(self.path):
            if not _is_socket(self.path):  # never delete a file that is not ours
                raise FileExistsError(f"{self.path} exists and is not a socket")
            os.unlink(self.path)  # a previous agent's: datagram sockets are not reused
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # each datagram's sender
        sock.bind(self.path)
        os.chmod(self.path, SOCKET_MODE)
        sock.settimeout(0.2)  # to see the stop flag
        return sock

    def _run(self) -> None:
        assert self._socket is not None
        cred_size = socket.CMSG_SPACE(_UCRED.size)
        while not self._stop.is_set():
            try:
                payload, ancillary, _, _ = self._socket.recvmsg(MAX_DATAGRAM_BYTES + 1, cred_size)
            except TimeoutError:
                continue
            except OSError as error:
                log.warning("training hook socket: %s", error)
                self._stop.wait(0.2)
                continue
            self._receive(payload, _sender(ancillary))

    def _run_tcp(self) -> None:
        """Accepts hooks' connections and reads their length-framed datagrams."""
        assert self._listener is not None
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ)
        buffers: dict[socket.socket, bytearray] = {}
        try:
            while not self._stop.is_set():
                for key, _ in selector.select(timeout=0.2):
                    if key.fileobj is self._listener:
                        self._accept(selector, buffers)
                    else:
                        self._read(selector, buffers, key.fileobj)  # type: ignore[arg-type]
        finally:
            for connection in buffers:
                connection.close()
            selector.close()

    def _accept(self, selector: selectors.BaseSelector, buffers: dict) -> None:
        assert self._listener is not None
        try:
            connection, peer = self._listener.accept()
        except OSError:
            return
        if len(buffers) >= MAX_CONNECTIONS:
            self._count("refused: too many hook connections", 1, str(peer))
            connection.close()
            return
        connection.setblocking(False)
        buffers[connection] = bytearray()
        selector.register(connection, selectors.EVENT_READ)

    def _read(
        self, selector: selectors.BaseSelector, buffers: dict, connection: socket.socket
    ) -> None:
        try:
            chunk = connection.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        buffer = buffers[connection]
        buffer += chunk
        sender = Sender(address=_peer(connection))
        while len(buffer) >= FRAME.size:
            size = FRAME.unpack_from(buffer)[0]
            if size > MAX_DATAGRAM_BYTES:
                self._count("malformed: not a hook datagram", 1, f"{sender}: frame of {size} B")
                chunk = b""  # not this protocol: drop the connection
                break
            if len(buffer) < FRAME.size + size:
                break
            payload = bytes(buffer[FRAME.size : FRAME.size + size])
            del buffer[: FRAME.size + size]
            self._receive(payload, sender)
        if not chunk:  # closed (a half-sent frame is discarded), or not this protocol
            selector.unregister(connection)
            del buffers[connection]
            connection.close()

    def _receive(self, payload: bytes, sender: Sender | None = None) -> None:
        try:
            dropped, lines = parse_datagram(payload)
        except BadDatagram as error:
            self._count("malformed: not a hook datagram", 1, str(error))
            return
        if dropped:
            self._count(DROPPED_BY_HOOKS, dropped)
        sender = sender or Sender()
        slurm_job = self._slurm_job(sender)
        for line in lines:
            point = self._checked(line)
            if point is None or not self._senders_own(point, sender, slurm_job):
                continue
            if len(self._queue) >= self.max_queued_points:
                self._count(DROPPED_HERE, 1)
            else:
                self._queue.append(point)
        self.received_lines += len(lines)

    def _checked(self, line: str) -> Point | None:
        """The point ``line`` means, stamped with this node; None (counted) when refused."""
        try:
            point = decode(line, self._schema)
        except PointError as error:
            self._count(f"malformed: {error.code}", 1, str(error))
            return None
        except Exception as error:  # the decoder must never kill the receiver
            self._count("malformed: unparseable", 1, repr(error))
            return None
        if point.measurement not in HOOK_MEASUREMENTS or (
            point.measurement == "event" and point.tags.get("source") != "training"
        ):
            self._count("malformed: not a training hook record", 1, line[:80])
            return None
        return Point(point.measurement, {**point.tags, **self._stamp}, point.fields, point.time_ns)

    def _slurm_job(self, sender: Sender) -> str | None:
        """The Slurm job a sending process runs in, from its cgroup (world-readable)."""
        if not sender.pid:  # 0: the sender's pid namespace is not visible from here
            return None
        try:
            with open(f"{self.proc_root}/{sender.pid}/cgroup") as handle:
                found = _SLURM_JOB.search(handle.read())
        except OSError:
            return None
        return found.group(1) if found else None

    def _senders_own(self, point: Point, sender: Sender, slurm_job: str | None) -> bool:
        """Whether ``sender`` may send this record: its job is the sender's (see the module
        docstring); refused and counted otherwise."""
        job = point.tags.get("job") or str(point.fields.get("job", ""))
        if not job or sender.uid is None:
            return True  # TCP, or a sender the kernel did not name: known by address only
        if slurm_job is not None and job != slurm_job:
            self._count(NOT_THE_SENDERS_JOB, 1, f"{sender} runs Slurm job {slurm_job}, sent {job}")
            return False
        owner = self.owners.get(job)
        if owner is None:
            self.owners[job] = sender
            if len(self.owners) > MAX_JOBS:
                self.owners.popitem(last=False)
            log.info("training hook: job %s from %s", job, sender)
            return True
        self.owners.move_to_end(job)
        if owner.uid != sender.uid:
            self._count(
                NOT_THE_SENDERS_JOB, 1, f"{sender} sent job {job}, owned by uid {owner.uid}"
            )
            return False
        return True

    def _count(self, reason: str, records: int, detail: str = "") -> None:
        with self._lock:  # copy, then swap: the agent sums the dict from its own thread
            counts = dict(self.parse_errors)
            count = counts[reason] = counts.get(reason, 0) + records
            self.parse_errors = counts
        if detail and (count <= 10 or count % 1000 == 0):
            log.warning("training hook record refused (%s, %d so far): %s", reason, count, detail)


def _sender(ancillary: list[tuple[int, int, bytes]]) -> Sender:
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid, uid, _gid = _UCRED.unpack(data[: _UCRED.size])
            return Sender(pid=pid, uid=uid)
    return Sender()


def _listen(address: str) -> socket.socket:
    host, port = parse_address(address)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.create_server((host, port), family=family, backlog=128)
    listener.setblocking(False)
    return listener


def _peer(connection: socket.socket) -> str:
    try:
        host, port = connection.getpeername()[:2]
    except OSError:
        return "tcp"
    return f"{host}:{port}"


def _is_socket(path: str) -> bool:
    return stat.S_ISSOCK(os.lstat(path).st_mode)


def build(identity: Identity, settings: CollectSettings) -> HookReceiver:
    return HookReceiver(
        identity.cluster,
        identity.node,
        path=os.environ.get(SOCKET_ENV) or settings.hook_socket,
        address=os.environ.get(ADDRESS_ENV, settings.hook_address).strip(),
        interval_s=settings.interval("hook", 1.0),
        proc_root=settings.proc_root,
    )
