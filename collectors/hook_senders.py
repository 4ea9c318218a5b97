"""Who sends training-hook records, and whether the job they name is theirs.

On the agent's socket the kernel names each datagram's sender (``SO_PASSCRED``: its pid, uid
and gid, not the sender's word). A job belongs to the first user that sends for it (remembered
for the last ``MAX_JOBS`` jobs, logged once with the pid); another user's records for it are
refused. Where the sender's cgroup names its Slurm job (``/proc/<pid>/cgroup``, world-readable:
``.../job_<id>/...``), a record for another job is refused. TCP senders are known by address
only, and no rule applies to them.

>>> owners = JobOwners(proc_root="/nonexistent")
>>> owners.refusal("j1", Sender(pid=10, uid=1000)) is None
True
>>> owners.refusal("j1", Sender(pid=11, uid=1001))
'pid 11 uid 1001 sent job j1, owned by uid 1000'
"""

from __future__ import annotations

import logging
import re
import socket
import struct
from collections import OrderedDict
from dataclasses import dataclass

log = logging.getLogger(__name__)

MAX_JOBS = 10_000  # jobs whose sending user is remembered
_UCRED = struct.Struct("iII")  # struct ucred: pid, uid, gid
CREDENTIALS_SPACE = socket.CMSG_SPACE(_UCRED.size)  # recvmsg's ancillary buffer
_SLURM_JOB = re.compile(r"/job_(\d+)(?:/|$)")


@dataclass(frozen=True)
class Sender:
    """Who sent a datagram: the kernel's pid/uid on the socket, the peer address on TCP."""

    pid: int | None = None
    uid: int | None = None
    address: str = ""

    def __str__(self) -> str:
        return self.address or f"pid {self.pid} uid {self.uid}"


def sender_of(ancillary: list[tuple[int, int, bytes]]) -> Sender:
    """The sender ``recvmsg`` gave with a datagram (SCM_CREDENTIALS), else an unnamed one."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid, uid, _gid = _UCRED.unpack(data[: _UCRED.size])
            return Sender(pid=pid, uid=uid)
    return Sender()


class JobOwners:
    """The first sender of each job, and the rules above."""

    def __init__(self, proc_root: str = "/proc") -> None:
        self.proc_root = proc_root
        self.owners: OrderedDict[str, Sender] = OrderedDict()  # job -> its first sender

    def slurm_job(self, sender: Sender) -> str | None:
        """The Slurm job a sending process runs in, from its cgroup."""
        if not sender.pid:  # None, or 0: its pid namespace is not visible from here
            return None
        try:
            with open(f"{self.proc_root}/{sender.pid}/cgroup") as handle:
                found = _SLURM_JOB.search(handle.read())
        except OSError:
            return None
        return found.group(1) if found else None

    def refusal(self, job: str, sender: Sender, slurm_job: str | None = None) -> str | None:
        """Why ``sender`` may not send records of ``job``; None when it may."""
        if not job or sender.uid is None:
            return None  # TCP, or a sender the kernel did not name: known by address only
        if slurm_job is not None and job != slurm_job:
            return f"{sender} runs Slurm job {slurm_job}, sent {job}"
        owner = self.owners.get(job)
        if owner is None:
            self.owners[job] = sender
            if len(self.owners) > MAX_JOBS:
                self.owners.popitem(last=False)
            log.info("training hook: job %s from %s", job, sender)
            return None
        self.owners.move_to_end(job)
        if owner.uid != sender.uid:
            return f"{sender} sent job {job}, owned by uid {owner.uid}"
        return None
