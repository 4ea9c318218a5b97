"""The training hook: per-rank step times and job membership, from inside the training script.

Standard library only. On the training thread a call only reads the clock and appends a tuple
to a bounded deque (a few microseconds); a daemon thread turns the tuples into line protocol
and sends them to the node's agent over a local Unix socket (:mod:`collectors.hook_socket`;
``REFLEX_HOOK_SOCKET``, default ``/run/reflex/hook.sock``), which stamps, journals and writes
them: the job holds no token. Nothing here blocks training or raises into it: when the queue
is full, or the agent is away past the retry buffer, records are dropped and counted in
:attr:`TrainingHook.stats` (and reported to the agent with the next datagram that gets there).

Pods that may not mount the socket send the same records to the agent's TCP port at their
node's address: ``REFLEX_HOOK_ADDRESS=$(HOST_IP):9103`` with ``HOST_IP`` from the downward API's
``status.hostIP`` (deploy/training-pod-example.yaml). The job is named by :func:`job_id`.

Sites without an agent opt in to InfluxDB directly with ``REFLEX_HOOK_SINK=influx`` and the
``REFLEX_INFLUX_*`` variables, or ``sink=http_sink(...)``.

PyTorch in one line: ``hook.attach(optimizer)`` ends a step after each ``optimizer.step()``
and times it as the optimizer section. Named sections (``with hook.section("forward"):``;
data, forward, backward, optimizer, checkpoint) fill the ``*_seconds`` fields of
``train_step``; when a script marks sections but no ``compute`` phase, compute is forward +
backward + optimizer. Once the process has initialized CUDA, sections are timed on the GPU by
CUDA events read a step later (:mod:`collectors.section_timers`; CPU clocks before that and as
the fallback), and each record says which in ``section_timer``.

Like the agent, the HTTP sink learns from InfluxDB's ``Date`` headers how far this node's clock
is off (:mod:`influx.clock_offset`); past the tolerance, records are stamped with the server's
time, so a node with a broken clock does not look late or missing to the flow.

Who this rank is comes from the arguments, else torch.distributed when it is initialized,
else the launcher's environment (torchrun RANK/WORLD_SIZE/LOCAL_RANK, SLURM_PROCID/
SLURM_NTASKS/SLURM_LOCALID; the job from :func:`job_id`). dp/pp/tp ranks follow Megatron-LM's layout
(tensor-parallel ranks adjacent, then data-parallel, then pipeline stages) from ``tp_size`` and
``pp_size``. The GPU it reports is the CUDA device it uses (its local rank), with the process's
``CUDA_VISIBLE_DEVICES`` and ``NVIDIA_VISIBLE_DEVICES`` as they were at start, so that the flow
can tell which of the node's GPUs that is when the job sees only some
(flows/signals/visible_gpus.py).

>>> sent = []
>>> hook = TrainingHook(job="j1", rank=0, world_size=8, tp_size=8, sink=sent.append,
...                     cluster="c1", node="n1", flush_interval_s=0.05)
>>> with hook.compute:
...     pass
>>> hook.step(tokens=4096)
>>> hook.close()
>>> "train_step,cluster=c1,job=j1,node=n1,rank=0 step=1i" in "".join(sent)
True
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reflex_localize.collectors.hook_socket import ADDRESS_ENV, SocketSink, TcpSink, socket_path
from reflex_localize.collectors.section_timers import (
    CPU,
    CpuSectionTimer,
    CudaSectionTimer,
    SectionTimer,
    cuda_in_use,
)
from reflex_localize.influx.clock_offset import ClockOffset

log = logging.getLogger(__name__)

Sink = Callable[[str], None]  # takes a batch of line protocol; raises on failure
MEMBERSHIP_EVERY_S = 60.0  # job_membership is restated so a flow joining late still sees it
# Accumulators of a step, in order: the two phases, then the named sections (train_step
# fields NAME_seconds), then one that takes an unknown section's time and is never written.
SECTIONS = ("data", "forward", "backward", "optimizer", "checkpoint")
_PHASES = ("compute", "comm", *SECTIONS, "unknown")
_COMPUTE_SECTIONS = slice(3, 6)  # forward, backward, optimizer
MAX_MESSAGE_CHARS = 4096  # of an event's message: a line always fits one datagram
# Membership fields -> the variables that renumber a process's GPUs; 16 UUIDs take 650 chars.
_VISIBLE = {"cuda_visible_devices": "CUDA_VISIBLE_DEVICES",
            "nvidia_visible_devices": "NVIDIA_VISIBLE_DEVICES"}  # fmt: skip
MAX_VISIBLE_CHARS = 1024


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: int | None
    job: str
    dp_rank: int | None = None
    tp_rank: int | None = None
    pp_rank: int | None = None
    pp_size: int | None = None


@dataclass
class HookStats:
    steps: int = 0
    sent_lines: int = 0
    dropped_queue_full: int = 0
    dropped_send_failed: int = 0
    send_errors: int = 0
    last_send_error: str = ""

    @property
    def dropped(self) -> int:
        return self.dropped_queue_full + self.dropped_send_failed


def detect_rank(
    env: Mapping[str, str], job: str | None = None, tp_size: int = 1, pp_size: int = 1
) -> RankInfo:
    """This process's rank, from torch.distributed when initialized, else the environment."""
    rank, world = _torch_rank()
    if rank is None:
        rank = _int(env, "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK") or 0
        world = _int(env, "WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE") or 1
    local = _int(env, "LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK")
    return with_layout(rank, world or 1, local, job or job_id(env), tp_size, pp_size)


def job_id(env: Mapping[str, str]) -> str:
    """The job this process belongs to, as the scheduler or the operator names it, the same in
    every rank: ``REFLEX_JOB`` (set it in Kubernetes from the Job's label with the downward API,
    ``metadata.labels['batch.kubernetes.io/job-name']``), else ``SLURM_JOB_ID``, else torchrun's
    ``TORCHELASTIC_RUN_ID`` unless it is its default ``none``, else torchrun's rendezvous
    (``MASTER_ADDR:MASTER_PORT``: no two running jobs share it), else this process alone
    (``<host>-<pid>``). Never one name shared by unrelated jobs.

    >>> job_id({"TORCHELASTIC_RUN_ID": "none", "SLURM_JOB_ID": "4242"})
    '4242'
    >>> job_id({"TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"})
    'torchrun-10.0.0.1:29500'
    """
    for name in ("REFLEX_JOB", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"):
        value = env.get(name, "").strip()
        if value and value.lower() != "none":
            return value
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        return f"torchrun-{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
    return f"{socket.gethostname()}-{os.getpid()}"


def with_layout(
    rank: int, world: int, local: int | None, job: str, tp_size: int, pp_size: int
) -> RankInfo:
    """Megatron-LM order: rank = pp_rank * (dp * tp) + dp_rank * tp + tp_rank."""
    if tp_size < 1 or pp_size < 1 or world % (tp_size * pp_size):
        return RankInfo(rank, world, local, job)
    dp_size = world // (tp_size * pp_size)
    return RankInfo(
        rank,
        world,
        local,
        job,
        dp_rank=(rank // tp_size) % dp_size,
        tp_rank=rank % tp_size,
        pp_rank=rank // (tp_size * dp_size),
        pp_size=pp_size,
    )


def _torch_rank() -> tuple[int | None, int | None]:
    distributed = sys.modules.get("torch.distributed")  # never import torch ourselves
    try:
        if distributed is not None and distributed.is_available() and distributed.is_initialized():
            return int(distributed.get_rank()), int(distributed.get_world_size())
    except Exception:
        pass
    return None, None


def _int(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = env.get(name, "")
        if value.strip().isdigit():
            return int(value)
    return None


class _Phase:
    """A reusable context manager adding elapsed time to one of the hook's accumulators, and
    handing the hook's section timer its entry and exit (CUDA events, when in use)."""

    __slots__ = ("_hook", "_index", "_started", "_timer", "_token")

    def __init__(self, hook: TrainingHook, index: int) -> None:
        self._hook, self._index, self._started = hook, index, 0.0
        self._timer: SectionTimer = hook._timer
        self._token: Any = None

    def __enter__(self) -> None:
        self._timer = timer = self._hook._timer  # the one that issued the token ends it
        self._token = timer.enter()
        self._started = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self._hook._phase_seconds[self._index] += time.perf_counter() - self._started
        self._timer.exit(self._index, self._token)


class TrainingHook:
    """See the module docstring. Methods on the training thread never raise."""

    def __init__(
        self,
        *,
        job: str | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        local_rank: int | None = None,
        tp_size: int = 1,
        pp_size: int = 1,
        profile: str | None = None,
        cluster: str | None = None,
        node: str | None = None,
        sink: Sink | None = None,
        env: Mapping[str, str] | None = None,
        max_queue: int = 10_000,
        max_retry_lines: int = 50_000,
        flush_interval_s: float = 1.0,
        section_timer: SectionTimer | None = None,
    ) -> None:
        env = os.environ if env is None else env
        # CPU clocks until the process has initialized CUDA; a timer handed in stays.
        self._timer: SectionTimer = section_timer or CpuSectionTimer()
        self._timer_chosen = section_timer is not None
        if rank is not None:
            self.info = with_layout(
                rank, world_size or 1, local_rank, job or job_id(env), tp_size, pp_size
            )
        else:
            self.info = detect_rank(env, job, tp_size, pp_size)
        self.cluster = cluster or env.get("REFLEX_CLUSTER") or "default"
        self.node = node or env.get("REFLEX_NODE") or socket.gethostname()
        self.profile = profile
        # How this process numbers its GPUs: sent with the membership, undone by the flow.
        self._visible = {name: env.get(variable, "")[:MAX_VISIBLE_CHARS]
                         for name, variable in _VISIBLE.items()}  # fmt: skip
        self.stats = HookStats()
        self._phase_seconds = [0.0] * len(_PHASES)
        self._phases = {name: _Phase(self, index) for index, name in enumerate(_PHASES)}
        self.compute, self.comm = self._phases["compute"], self._phases["comm"]
        self._unknown_sections: set[str] = set()
        self._sink: Sink | SocketSink = sink if sink is not None else sink_from_env(env)
        self._queue: deque[tuple[Any, ...]] = deque()
        self._max_queue = max_queue
        self._retry: deque[str] = deque()
        self._max_retry = max_retry_lines
        self._cut_off = False  # the last send failed: the agent may have restarted
        self._flush_interval_s = flush_interval_s
        self._last_step = time.perf_counter()
        self._step_number = 0
        self._queue.append(("membership", time.time_ns(), True))
        self._next_membership = time.monotonic() + MEMBERSHIP_EVERY_S
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reflex-hook", daemon=True)
        self._thread.start()

    # -- the training thread ------------------------------------------------------------------

    def step(
        self, *, tokens: int | None = None, loss: float | None = None, step: int | None = None
    ) -> None:
        """Ends a step: its time is the time since the previous call (or since the hook began)."""
        now = time.perf_counter()
        wall_ns = time.time_ns()
        phases, self._phase_seconds = self._phase_seconds, [0.0] * len(_PHASES)
        elapsed, self._last_step = now - self._last_step, now
        self._step_number = step if step is not None else self._step_number + 1
        record = (wall_ns, self._step_number, elapsed, tokens, loss)
        try:  # with CUDA events, the steps whose GPU times are now known (one step late)
            ready = self._timer.end_step(record, phases)
        except Exception:
            ready = [(record, phases, CPU)]
        for (ended_ns, number, seconds, step_tokens, step_loss), times, timer in ready:
            self._put(("step", ended_ns, number, seconds, times, step_tokens, step_loss, timer))
        if not self._timer_chosen:
            self._choose_timer()

    def _choose_timer(self) -> None:
        cuda = cuda_in_use()
        if cuda is not None:
            self._timer, self._timer_chosen = CudaSectionTimer(cuda), True

    def section(self, name: str) -> _Phase:
        """``with hook.section("forward"):`` adds the block's time to this step's section
        (data, forward, backward, optimizer, checkpoint). The object is reusable: fetch it once
        outside the loop to save a dictionary lookup. An unknown name is logged, not raised."""
        if name in SECTIONS:
            return self._phases[name]
        if name not in self._unknown_sections:  # once: it is asked for at every step
            self._unknown_sections.add(name)
            log.warning("reflex training hook: no section %r (known: %s)", name, SECTIONS)
        return self._phases["unknown"]

    def attach(self, optimizer: Any, *, tokens_per_step: int | None = None) -> list[Any]:
        """One line for PyTorch: each ``optimizer.step()`` ends a step and is timed as the
        optimizer section, through ``register_step_pre_hook`` / ``register_step_post_hook``
        (``torch.optim.Optimizer``, torch 2.0+). Returns their handles (``.remove()``). An
        object without those methods is logged and left alone."""
        post = getattr(optimizer, "register_step_post_hook", None)
        if not callable(post):
            log.warning("reflex training hook: %r has no register_step_post_hook", optimizer)
            return []
        timer = self._phases["optimizer"]

        def started(_optimizer: Any, _args: Any, _kwargs: Any) -> None:
            timer.__enter__()

        def finished(_optimizer: Any, _args: Any, _kwargs: Any) -> None:
            try:
                if timer._started:
                    timer.__exit__()
                    timer._started = 0.0
                self.step(tokens=tokens_per_step)
            except Exception:  # never into the training step
                log.debug("reflex training hook: optimizer hook failed", exc_info=True)

        pre = getattr(optimizer, "register_step_pre_hook", None)
        handles = [pre(started)] if callable(pre) else []
        return [*handles, post(finished)]

    def event(self, kind: str, message: str, code: int | None = None) -> None:
        """A training-side event (nccl_timeout, process_exit, ...), written at the next flush."""
        self._put(("event", time.time_ns(), kind, message, code))

    def _put(self, record: tuple[Any, ...]) -> None:
        # deque.append is atomic under the GIL; the length check may let a few records past
        # max_queue when threads race, which is harmless.
        if len(self._queue) >= self._max_queue:
            self.stats.dropped_queue_full += 1
        else:
            self._queue.append(record)

    def close(self, timeout_s: float = 5.0) -> None:
        """Marks this rank inactive, sends what is queued (for up to ``timeout_s``), stops."""
        try:
            for (ended_ns, number, seconds, tokens, loss), times, timer in self._timer.drain(
                min(timeout_s, 1.0)
            ):
                self._put(("step", ended_ns, number, seconds, times, tokens, loss, timer))
            self._put(("membership", time.time_ns(), False))
            self._stop.set()
            self._thread.join(timeout_s)
            left = len(self._queue) + len(self._retry)
            if self._thread.is_alive():  # still sending (a slow sink): it may yet get there
                log.warning("reflex training hook: closing with %d records unsent", left)
            else:  # what the last flushes could not send is lost with the process: counted
                self.stats.dropped_send_failed += left
            if self.stats.dropped:
                stats = self.stats
                log.warning(
                    "reflex training hook: %d records dropped (%s); last error: %s",
                    stats.dropped, self._sink, stats.last_send_error or "-",
                )  # fmt: skip
            if isinstance(self._sink, SocketSink):
                self._sink.close()
        except Exception:
            log.debug("reflex training hook: close failed", exc_info=True)

    # -- the background thread ----------------------------------------------------------------

    def _run(self) -> None:
        probe = getattr(self._sink, "probe", None)
        if callable(probe):  # the server's time before the first records are stamped
            try:
                probe()
            except Exception:
                log.debug("reflex training hook: clock probe failed", exc_info=True)
        while True:
            stopping = self._stop.wait(self._flush_interval_s)
            before = -1
            # On close, flush again while it makes progress (a backlog larger than the agent
            # takes at once); close()'s timeout bounds it.
            while before != self.stats.sent_lines:
                before = self.stats.sent_lines
                try:
                    self._flush()
                except Exception:
                    self.stats.send_errors += 1
                    log.debug("reflex training hook: flush failed", exc_info=True)
                if not stopping or not (self._queue or self._retry):
                    break
            if stopping:
                return

    def _flush(self) -> None:
        now = time.monotonic()
        if now >= self._next_membership and not self._stop.is_set():
            self._next_membership = now + MEMBERSHIP_EVERY_S
            self._queue.append(("membership", time.time_ns(), True))
        lines = list(self._retry)
        self._retry.clear()
        while self._queue:
            lines.append(self._line(self._queue.popleft()))
        if not lines:
            return
        if isinstance(self._sink, SocketSink):
            sent = self._sink.send_lines(lines, self.stats.dropped)
            self.stats.sent_lines += sent
            if sent and self._cut_off:  # the agent is back: restate membership at once
                self._next_membership = 0.0
            self._cut_off = sent < len(lines)
            if sent < len(lines):
                self._keep_for_retry(lines[sent:], self._sink.last_error)
            return
        try:
            self._sink("\n".join(lines) + "\n")
        except Exception as error:
            self._keep_for_retry(lines, str(error))
            return
        self.stats.sent_lines += len(lines)

    def _keep_for_retry(self, lines: list[str], error: str) -> None:
        self.stats.send_errors += 1
        self.stats.last_send_error = error
        log.debug("reflex training hook: send failed: %s", error)
        keep = lines[-self._max_retry :]
        self.stats.dropped_send_failed += len(lines) - len(keep)
        self._retry.extend(keep)

    def _line(self, record: tuple[Any, ...]) -> str:
        kind, wall_ns = record[0], record[1]
        offset = getattr(self._sink, "clock_offset", None)
        if isinstance(offset, ClockOffset):
            wall_ns += offset.correction_ns()
        info = self.info
        head = f"cluster={_tag(self.cluster)},job={_tag(info.job)},node={_tag(self.node)}"
        head += f",rank={info.rank}"
        if kind == "step":
            _, _, number, elapsed, phases, tokens, loss, timer = record
            self.stats.steps += 1
            fields = [f"step={number}i", f"step_time_seconds={float(elapsed)!r}"]
            compute = phases[0] or sum(phases[_COMPUTE_SECTIONS])
            if compute:
                fields.append(f"compute_seconds={float(compute)!r}")
            if phases[1]:
                fields.append(f"comm_seconds={float(phases[1])!r}")
            for name, seconds in zip(SECTIONS, phases[2:], strict=False):
                if seconds:
                    fields.append(f"{name}_seconds={float(seconds)!r}")
            if any(phases[:-1]):  # which clock timed the sections above
                fields.append(f'section_timer="{timer}"')
            if tokens is not None and elapsed > 0:
                fields.append(f"tokens_per_second={float(tokens / elapsed)!r}")
            if loss is not None and _finite(loss):
                fields.append(f"loss={float(loss)!r}")
            return f"train_step,{head} {','.join(fields)} {wall_ns}"
        if kind == "event":
            _, _, event_kind, message, code = record
            tags = f"cluster={_tag(self.cluster)},kind={_tag(event_kind)},node={_tag(self.node)}"
            fields = [
                f"job={_string(writable_tag_value(info.job))}",  # as its train_step tag
                f"rank={info.rank}i",
                f"message={_string(str(message)[:MAX_MESSAGE_CHARS])}",
            ]
            if code is not None:
                fields.append(f"code={int(code)}i")
            return f"event,{tags},source=training {','.join(fields)} {wall_ns}"
        return f"job_membership,{head} {self._membership_fields(record[2])} {wall_ns}"

    def _membership_fields(self, active: bool) -> str:
        info = self.info
        fields = [f"world_size={info.world_size}i", f"active={'true' if active else 'false'}"]
        for name in ("dp_rank", "pp_rank", "tp_rank", "pp_size"):
            value = getattr(info, name)
            if value is not None:
                fields.append(f"{name}={value}i")
        if info.local_rank is not None:
            fields.append(f"gpu={info.local_rank}i")
        fields += [f"{name}={_string(value)}" for name, value in self._visible.items() if value]
        if self.profile:
            fields.append(f"profile={_string(self.profile)}")
        return ",".join(fields)


def _finite(value: float) -> bool:
    return value == value and value not in (float("inf"), float("-inf"))


# Line protocol, a copy of schemas/codec.py's rules (InfluxDB's models/points.go), kept here
# so the hook needs nothing but the standard library; tests/test_hostile_tags.py holds the
# two to byte-identical lines. Tag values are never backslash-escaped: InfluxDB unescapes
# only "\,", "\ " and "\=" there and keeps every other backslash as it is.
_KEY_ESCAPES = ((",", "\\,"), ("=", "\\="), (" ", "\\ "))
_STRING_ESCAPES = (("\\", "\\\\"), ('"', '\\"'))
# Where the codec refuses a value, the hook must not: it never raises into training, and its
# identity tags are fixed for its whole life. So line breaks become spaces, and backslashes
# that line protocol cannot carry (before a space, comma or equals sign, or at the end) go.
_UNWRITABLE_BACKSLASHES = re.compile(r"\\+(?=[ ,=]|$)")


def writable_tag_value(value: object) -> str:
    """The tag value the hook writes for ``value``: ``value`` itself when the codec takes it."""
    text = str(value).replace("\n", " ").replace("\r", " ")
    return _UNWRITABLE_BACKSLASHES.sub("", text) or "unknown"


def _tag(value: object) -> str:
    return _escaped(writable_tag_value(value), _KEY_ESCAPES)


def _string(value: object) -> str:
    text = str(value).replace("\n", " ").replace("\r", " ")
    return '"' + _escaped(text, _STRING_ESCAPES) + '"'


def _escaped(text: str, table: tuple[tuple[str, str], ...]) -> str:
    for raw, escaped in table:
        text = text.replace(raw, escaped)
    return text


class HttpSink:
    """POSTs a batch to InfluxDB 2.x ``/api/v2/write`` (ns precision); raises on failure.

    Each answer's ``Date`` feeds :attr:`clock_offset`, which the hook reads to correct stamps.
    """

    def __init__(
        self,
        url: str,
        token: str,
        org: str,
        bucket: str,
        *,
        timeout_s: float = 5.0,
        clock_offset: ClockOffset | None = None,
    ) -> None:
        query = urllib.parse.urlencode({"org": org, "bucket": bucket, "precision": "ns"})
        self._endpoint = f"{url.rstrip('/')}/api/v2/write?{query}"
        self._token, self._timeout_s = token, timeout_s
        self.clock_offset = clock_offset or ClockOffset()

    def __repr__(self) -> str:
        return f"HttpSink({self._endpoint!r})"  # never the token

    def probe(self, timeout_s: float = 2.0) -> None:
        """One ``/ping`` for the server's time; raises when InfluxDB does not answer."""
        clock = self.clock_offset
        sent_ns = clock.wall()
        ping = self._endpoint.split("/api/v2/write", 1)[0] + "/ping"
        with urllib.request.urlopen(ping, timeout=timeout_s) as response:
            clock.observe(sent_ns, clock.wall(), response.headers["Date"])

    def __call__(self, batch: str) -> None:
        request = urllib.request.Request(
            self._endpoint,
            data=batch.encode(),
            method="POST",
            headers={"Authorization": f"Token {self._token}", "Content-Type": "text/plain"},
        )
        clock = self.clock_offset
        sent_ns = clock.wall()
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                clock.observe(sent_ns, clock.wall(), response.headers["Date"])
                if response.status >= 300:
                    raise OSError(f"InfluxDB answered {response.status}")
        except urllib.error.HTTPError as error:  # a 4xx/5xx still tells the server's time
            clock.observe(sent_ns, clock.wall(), error.headers["Date"])
            raise


def http_sink(url: str, token: str, org: str, bucket: str, *, timeout_s: float = 5.0) -> Sink:
    """The sink to InfluxDB 2.x; see :class:`HttpSink`."""
    return HttpSink(url, token, org, bucket, timeout_s=timeout_s)


def sink_from_env(env: Mapping[str, str]) -> Sink | SocketSink:
    """The node agent's socket, unless ``REFLEX_HOOK_SINK=influx`` asks for InfluxDB directly."""
    choice = env.get("REFLEX_HOOK_SINK", "agent").strip().lower()
    if choice == "influx":
        return http_sink_from_env(env)
    if choice != "agent":
        log.warning("reflex training hook: REFLEX_HOOK_SINK=%r: expected agent or influx", choice)
    address = env.get(ADDRESS_ENV, "").strip()
    if address:  # the agent's TCP port at the node's address (a pod without the socket)
        try:
            return TcpSink(address)
        except ValueError as error:
            log.warning("reflex training hook: %s=%r: %s; using the socket", ADDRESS_ENV,
                        address, error)  # fmt: skip
    return SocketSink(socket_path(env))


def http_sink_from_env(env: Mapping[str, str]) -> Sink:
    """The InfluxDB sink the ``REFLEX_INFLUX_*`` variables describe, or one that drops."""
    url = env.get("REFLEX_INFLUX_URL")
    if not url:
        return _discard
    token = env.get("REFLEX_INFLUX_TOKEN", "")
    if not token and env.get("REFLEX_INFLUX_TOKEN_FILE"):
        try:
            from reflex_localize.influx.config import read_token_file

            token = read_token_file(Path(env["REFLEX_INFLUX_TOKEN_FILE"]))
        except Exception as error:
            log.warning("reflex training hook: no token (%s); not sending", error)
            return _discard
    org = env.get("REFLEX_INFLUX_ORG", "reflex")
    return http_sink(url, token, org, env.get("REFLEX_INFLUX_BUCKET", "telemetry"))


def _discard(batch: str) -> None:
    pass
