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

**Who sends.** On the socket every datagram comes with its sender's pid and uid
(``SO_PASSCRED``); a job keeps its first user, and a Slurm job may send only its own records
(:mod:`collectors.hook_senders`). TCP senders are known by address only
(:mod:`collectors.hook_tcp`). A training event is evidence: the flow never takes a
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
import socket
import stat
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

from reflex_localize.collectors.base import Emit, HardwareAbsent, base_tags
from reflex_localize.collectors.hook_senders import (
    CREDENTIALS_SPACE,
    JobOwners,
    Sender,
    sender_of,
)
from reflex_localize.collectors.hook_socket import (
    ADDRESS_ENV,
    MAX_DATAGRAM_BYTES,
    SOCKET_ENV,
    BadDatagram,
    parse_datagram,
)
from reflex_localize.collectors.hook_tcp import TcpListener
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
        self.jobs = JobOwners(proc_root)
        self._listener: TcpListener | None = None
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
                self._listener = TcpListener(
                    self.address,
                    self._receive,
                    lambda reason, detail: self._count(reason, 1, detail),
                )
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
            self._listener.start()

    @property
    def tcp_port(self) -> int | None:
        """The TCP port listened on (the one the kernel chose for port 0)."""
        return self._listener.port if self._listener is not None else None

    @property
    def owners(self) -> dict[str, Sender]:
        """Each job's first sender on the socket."""
        return dict(self.jobs.owners)

    def stop_background(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._listener is not None:
            self._listener.stop()
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
        while not self._stop.is_set():
            try:
                payload, ancillary, _, _ = self._socket.recvmsg(
                    MAX_DATAGRAM_BYTES + 1, CREDENTIALS_SPACE
                )
            except TimeoutError:
                continue
            except OSError as error:
                log.warning("training hook socket: %s", error)
                self._stop.wait(0.2)
                continue
            self._receive(payload, sender_of(ancillary))

    def _receive(self, payload: bytes, sender: Sender | None = None) -> None:
        try:
            dropped, lines = parse_datagram(payload)
        except BadDatagram as error:
            self._count("malformed: not a hook datagram", 1, str(error))
            return
        if dropped:
            self._count(DROPPED_BY_HOOKS, dropped)
        sender = sender or Sender()
        slurm_job = self.jobs.slurm_job(sender)
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

    def _senders_own(self, point: Point, sender: Sender, slurm_job: str | None) -> bool:
        """Whether ``sender`` may send this record: its job is the sender's (see the module
        docstring); refused and counted otherwise."""
        job = point.tags.get("job") or str(point.fields.get("job", ""))
        refusal = self.jobs.refusal(job, sender, slurm_job)
        if refusal is not None:
            self._count(NOT_THE_SENDERS_JOB, 1, refusal)
        return refusal is None

    def _count(self, reason: str, records: int, detail: str = "") -> None:
        with self._lock:  # copy, then swap: the agent sums the dict from its own thread
            counts = dict(self.parse_errors)
            count = counts[reason] = counts.get(reason, 0) + records
            self.parse_errors = counts
        if detail and (count <= 10 or count % 1000 == 0):
            log.warning("training hook record refused (%s, %d so far): %s", reason, count, detail)


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
