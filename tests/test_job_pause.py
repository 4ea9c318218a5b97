"""What counts as a job writing a checkpoint (flows/signals/job_pause.py): every GPU idle and
the hosts writing. A stuck collective (waiting GPUs spin), a hang in host code (idle, nothing
written) and a job whose telemetry has no utilization are not credited."""

from __future__ import annotations

import numpy as np

from reflex_localize.flows.signals.job_pause import WindowActivity
from reflex_localize.schemas.frame import Frame

SECONDS = np.arange(10)


def _gpu(util_by_node: dict[str, np.ndarray], upper_half: np.ndarray | None = None) -> Frame:
    """Eight GPUs a node, one sample a second; ``util`` per second, the same on every GPU but
    GPUs 4-7 where ``upper_half`` is given (another job's, on a shared node)."""
    nodes, gpus, times, utils = [], [], [], []
    for node, util in util_by_node.items():
        for gpu in range(8):
            nodes += [node] * len(SECONDS)
            gpus += [str(gpu)] * len(SECONDS)
            times.append(SECONDS * 10**9 + gpu)
            utils.append(upper_half if upper_half is not None and gpu >= 4 else util)
    tags = {"node": np.array(nodes, dtype=object), "gpu": np.array(gpus, dtype=object)}
    fields = {"utilization_gpu_ratio": np.concatenate(utils)}
    return Frame("gpu", np.concatenate(times), tags, fields)


def _nic(rate_by_node: dict[str, np.ndarray], start: int = 10**12) -> Frame:
    nodes, counters = [], []
    for node, rate in rate_by_node.items():
        nodes += [node] * len(SECONDS)
        counters.append(start + np.cumsum(rate).astype(np.int64))
    tags = {"node": np.array(nodes, dtype=object), "device": np.full(len(nodes), "eth0", object)}
    times = np.tile(SECONDS * 10**9, len(rate_by_node))
    return Frame("nic", times, tags, {"tx_bytes": np.concatenate(counters)})


CHECKPOINT = SECONDS >= 5  # the window's last five seconds
IDLE_WHILE_WRITING = np.where(CHECKPOINT, 0.03, 0.97)
WRITES = np.where(CHECKPOINT, 6e8, 4e7)
QUIET = np.full(len(SECONDS), 4e7)


def test_a_checkpoint_is_the_seconds_every_gpu_idled_while_the_hosts_wrote() -> None:
    frames = {
        "gpu": [_gpu({"a": IDLE_WHILE_WRITING, "b": IDLE_WHILE_WRITING})],
        "nic": [_nic({"a": WRITES, "b": WRITES})],
    }
    assert WindowActivity.of(frames).paused_s({"a", "b"}, 10.0) == 5.0


def test_a_stuck_collective_is_not_a_checkpoint() -> None:
    """The cause node's GPUs idle; the waiting node's spin in the collective."""
    spinning = np.where(CHECKPOINT, 1.0, 0.97)
    frames = {
        "gpu": [_gpu({"a": IDLE_WHILE_WRITING, "b": spinning})],
        "nic": [_nic({"a": WRITES, "b": QUIET})],
    }
    assert WindowActivity.of(frames).paused_s({"a", "b"}, 10.0) == 0.0


def test_idle_gpus_with_nothing_written_are_not_a_checkpoint() -> None:
    frames = {"gpu": [_gpu({"a": IDLE_WHILE_WRITING})], "nic": [_nic({"a": QUIET})]}
    assert WindowActivity.of(frames).paused_s({"a"}, 10.0) == 0.0


def test_a_counter_that_resets_loses_one_interval_not_the_window() -> None:
    restarted = _nic({"a": WRITES})
    restarted.fields["tx_bytes"][5:] -= 10**12  # the driver reloaded: the counter starts over
    frames = {"gpu": [_gpu({"a": IDLE_WHILE_WRITING})], "nic": [restarted]}
    assert WindowActivity.of(frames).paused_s({"a"}, 10.0) == 5.0


def test_only_the_jobs_own_nodes_count() -> None:
    frames = {
        "gpu": [_gpu({"a": IDLE_WHILE_WRITING, "c": np.full(len(SECONDS), 0.97)})],
        "nic": [_nic({"a": WRITES, "c": QUIET})],
    }
    activity = WindowActivity.of(frames)
    assert activity.paused_s({"a"}, 10.0) == 5.0
    assert activity.paused_s({"a", "c"}, 10.0) == 0.0


def test_without_utilization_nothing_is_known() -> None:
    frames = {"nic": [_nic({"a": WRITES})]}
    assert WindowActivity.of(frames).paused_s({"a"}, 10.0) is None
    assert WindowActivity.of({}).paused_s(set(), 10.0) is None


def test_on_a_shared_node_only_the_jobs_own_gpus_count() -> None:
    """Job A (GPUs 0-3) writes its checkpoint while job B (GPUs 4-7) computes beside it."""
    computing = np.full(len(SECONDS), 0.97)
    frames = {"gpu": [_gpu({"a": IDLE_WHILE_WRITING}, computing)], "nic": [_nic({"a": WRITES})]}
    activity = WindowActivity.of(frames)
    assert activity.paused_s({"a"}, 10.0, {"a": {"0", "1", "2", "3"}}) == 5.0
    assert activity.paused_s({"a"}, 10.0, {"a": {"4", "5", "6", "7"}}) == 0.0  # B computes
    assert activity.paused_s({"a"}, 10.0) == 0.0  # the whole node: half of it computes
