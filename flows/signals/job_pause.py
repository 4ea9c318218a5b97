"""How much of a window a job spent writing a checkpoint: its GPUs idle, its hosts writing.

A job that makes no step is either pausing by itself or stuck, and its step rows cannot tell
which (no step comes either way). Its hardware can:

* a checkpoint the hook does not mark leaves every GPU of the job idle while its hosts write
  the state out, to local NVMe or over the storage network (gigabytes a second a node);
* a stuck NCCL collective leaves the waiting ranks' GPUs busy: they spin in the collective's
  kernels at full utilization until the watchdog fires;
* a hang in host code (a deadlocked dataloader, a filesystem that stopped answering) leaves
  the GPUs idle, but nothing is written.

Only the first pauses the hang detector's clock (``HangDetector.update``). Without GPU
utilization from the agent (a job with the training hook only) nothing is credited, so such a
job's hang fires as before. Checkpoints written over InfiniBand storage ports are not seen:
those ports carry NCCL traffic too. Where the job's ranks say which GPUs they run on, only
those are judged (another job may compute beside it on a shared node); the host's writes are
the node's, whoever wrote them.

>>> import numpy as np
>>> from reflex_localize.schemas.frame import Frame
>>> t = np.repeat(np.arange(10) * 10**9, 2)
>>> gpu = Frame("gpu", t, {"node": np.array(["n1"] * 20, dtype=object),
...     "gpu": np.array(["0", "1"] * 10, dtype=object)},
...     {"utilization_gpu_ratio": np.where(t >= 4 * 10**9, 0.02, 0.97)})
>>> nic = Frame("nic", np.arange(10) * 10**9, {"node": np.array(["n1"] * 10, dtype=object),
...     "device": np.array(["eth0"] * 10, dtype=object)},
...     {"tx_bytes": np.cumsum(np.where(np.arange(10) >= 4, 6e8, 4e7)).astype(np.int64)})
>>> WindowActivity.of({"gpu": [gpu], "nic": [nic]}).paused_s({"n1"}, 10.0)
6.0
>>> WindowActivity.of({"gpu": [gpu]}).paused_s({"n1"}, 10.0)  # idle, nothing written
0.0
>>> WindowActivity.of({"nic": [nic]}).paused_s({"n1"}, 10.0) is None  # no utilization
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from reflex_localize.flows.signals.derive import factorize
from reflex_localize.schemas.frame import Frame

IDLE_UTIL = 0.3  # a GPU that ran kernels less than this share of the sample was not computing
ALL_IDLE = 0.9  # share of the job's GPUs idle at one sample for the job to be idle then
MIN_IDLE_SHARE = 0.2  # of the window: a second or two of idling is a step's own gap
# Per node while idle: disk writes and host NIC transmit together. A checkpoint writes
# gigabytes a second; logs and the dataloader's requests are tens of megabytes.
WRITE_BYTES_S = 2e8
# Counters of bytes a host writes out: local disks and its (storage, front-end) NICs.
_WRITES = (("host_disk", "written_bytes", "device"), ("nic", "tx_bytes", "device"))


@dataclass
class WindowActivity:
    """One shard window's GPU idling and host writes, computed once for all its jobs:
    node -> GPU -> (second, idle samples, samples) and node -> bytes a second written out."""

    idle: dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]] = field(
        default_factory=dict
    )
    written: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, frames: Mapping[str, list[Frame]]) -> WindowActivity:
        return cls(_idle_by_gpu(frames.get("gpu", [])), _write_rate_by_node(frames))

    def paused_s(
        self, nodes: set[str], window_s: float, gpus: Mapping[str, set[str]] | None = None
    ) -> float | None:
        """Seconds of the window during which every GPU of the job on ``nodes`` was idle while
        their hosts wrote; None when no GPU utilization of those nodes came in. ``gpus``: node
        -> the job's GPUs there (a node not in it: all its GPUs)."""
        gpus = gpus or {}
        mine = [
            run
            for node in nodes
            for gpu, run in self.idle.get(node, {}).items()
            if node not in gpus or gpu in gpus[node]
        ]
        if not mine:
            return None
        second, where = np.unique(np.concatenate([m[0] for m in mine]), return_inverse=True)
        idle = np.bincount(where, np.concatenate([m[1] for m in mine]), len(second))
        total = np.bincount(where, np.concatenate([m[2] for m in mine]), len(second))
        idle_share = float(np.mean(idle >= ALL_IDLE * total))
        if idle_share < MIN_IDLE_SHARE:
            return 0.0
        rates = [self.written.get(n, 0.0) for n in nodes if n in self.idle]
        written = float(np.mean(rates))
        return idle_share * window_s if written >= idle_share * WRITE_BYTES_S else 0.0


def _idle_by_gpu(
    gpu_frames: list[Frame],
) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    nodes, gpus, seconds, idle = [], [], [], []
    for frame in gpu_frames:
        util = frame.fields.get("utilization_gpu_ratio")
        if util is None or "node" not in frame.tags or "gpu" not in frame.tags or not len(frame):
            continue
        known = np.isfinite(util)
        nodes.append(frame.tags["node"][known])
        gpus.append(frame.tags["gpu"][known])
        seconds.append(frame.time_ns[known] // 10**9)  # samples of one second count together
        idle.append(util[known] < IDLE_UTIL)
    if not nodes or not sum(len(n) for n in nodes):
        return {}
    node_names, node_code = factorize(np.concatenate(nodes))  # a dict: no sort of strings
    gpu_names, gpu_code = factorize(np.concatenate(gpus))
    second = np.concatenate(seconds)
    first, span = int(second.min()), int(second.max() - second.min()) + 1
    entity = node_code * len(gpu_names) + gpu_code
    key = entity * span + (second - first)  # one int per (GPU, second): sorts at C speed
    pairs, where = np.unique(key, return_inverse=True)
    idle_at = np.bincount(where, np.concatenate(idle).astype(float), len(pairs))
    total_at = np.bincount(where, minlength=len(pairs)).astype(float)
    code, at = pairs // span, pairs % span + first
    runs = np.flatnonzero(np.diff(code)) + 1  # sorted by GPU first: a run of keys a GPU
    starts = [0, *runs.tolist()]
    ends = [*starts[1:], len(code)]
    out: dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    # Slices, as np.split gives them, without its per-piece cost (a window has hundreds).
    for c, a, b in zip(code[starts].tolist(), starts, ends, strict=True):
        node, gpu = divmod(c, len(gpu_names))
        run = (at[a:b], idle_at[a:b], total_at[a:b])
        out.setdefault(str(node_names[node]), {})[str(gpu_names[gpu])] = run
    return out


def _write_rate_by_node(frames: Mapping[str, list[Frame]]) -> dict[str, float]:
    """Bytes a second each host wrote out this window: each counter's increase over its span
    (a reset counts nothing), summed over the host's disks and NICs."""
    by_node: dict[str, float] = {}
    for measurement, field_name, device in _WRITES:
        for frame in frames.get(measurement, []):
            counter = frame.fields.get(field_name)
            if counter is None or "node" not in frame.tags or not len(frame):
                continue
            known = np.isfinite(counter)
            keys = frame.tags["node"][known]
            if device in frame.tags:
                keys = keys + "|" + frame.tags[device][known]
            for key, rate in _series_rates(keys, frame.time_ns[known], counter[known]).items():
                node = key.split("|", 1)[0]
                by_node[node] = by_node.get(node, 0.0) + rate
    return by_node


def _series_rates(keys: np.ndarray, time_ns: np.ndarray, counter: np.ndarray) -> dict[str, float]:
    names, code = factorize(keys)  # ints to sort by: sorting strings compares them in Python
    order = np.lexsort((time_ns, code))
    code, time_ns, counter = code[order], time_ns[order], counter[order].astype(float)
    same = code[1:] == code[:-1]  # each difference, labelled by its later row's series
    grew = np.where(same, np.maximum(np.diff(counter), 0.0), 0.0)
    took = np.where(same, np.diff(time_ns) / 1e9, 0.0)
    total = np.bincount(code[1:], grew, len(names))
    span = np.bincount(code[1:], took, len(names))
    rates = zip(names.tolist(), total, span, strict=True)
    return {str(key): float(b / s) for key, b, s in rates if s > 0}
