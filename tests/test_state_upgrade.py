"""A flow upgraded in place resumes from snapshots that an older Reflex pickled: fields added
since (this stop's ``JobState.corrected`` and ``slowdown_onset_ns``, ``EvidenceBook.ended``)
come back with their defaults, and the state works."""

from __future__ import annotations

import copy
import pickle

import numpy as np

from reflex_localize.flows.judge.job_step import JobConfig, JobState
from reflex_localize.flows.judge.shard_step import ShardConfig, ShardState
from reflex_localize.flows.messages import JobWindow, StepRows


def _as_older_version(state: JobState) -> JobState:
    for name in ("corrected", "slowdown_onset_ns"):
        del state.__dict__[name]
    del state.book.__dict__["ended"]
    return state


def test_an_older_job_state_restores_with_the_new_fields() -> None:
    old = _as_older_version(JobState("train", JobConfig()))
    old.book.since[("node-0001|gpu|0", "sm_clock_low")] = 10
    for restored in (pickle.loads(pickle.dumps(old)), copy.deepcopy(old)):
        assert restored.corrected.scores == {} and restored.book.ended == {}
        assert restored.slowdown_onset_ns == JobState("x", JobConfig()).slowdown_onset_ns
        assert restored.book.since == {("node-0001|gpu|0", "sm_clock_low"): 10}  # kept
        assert restored._slowing("node-0001|gpu|0") == 0.0
        assert restored._held("node-0001|gpu|0", 10 * 10**10)


def test_a_shard_state_without_a_newer_field_restores_with_it() -> None:
    state = ShardState(ShardConfig())
    state.windows_seen = 7
    del state.__dict__["sites"]  # a field a later version added
    restored = pickle.loads(pickle.dumps(state))
    assert restored.sites == {} and restored.windows_seen == 7


def test_a_shard_state_from_before_the_gpu_clocks_keeps_its_baselines_and_learns_them() -> None:
    """``ShardState.busy_clocks``, ``JobState.past_clocks_taken``, ``RankDrift.past`` and a
    pending ``JobWindow.past_clocks`` came with issue 17's twelfth stop."""
    shard = ShardState(ShardConfig())
    shard.windows_seen = 7
    del shard.__dict__["busy_clocks"]
    restored = pickle.loads(pickle.dumps(shard))
    assert restored.busy_clocks.past == {} and restored.windows_seen == 7
    job = JobState("train", JobConfig())
    del job.__dict__["past_clocks_taken"]
    del job.step_peers.drift.__dict__["past"]
    back = pickle.loads(pickle.dumps(job))
    assert back.past_clocks_taken is False and back.step_peers.drift.past == {}


def test_a_pending_job_window_from_before_the_gpu_clocks_restores_with_them() -> None:
    empty = np.zeros((0, 1))
    window = JobWindow("train", "shard-0", 3, 0, empty[:, 0], empty, empty, empty, empty[:, 0],
                       [], [], StepRows(), [], 0)  # fmt: skip
    del window.__dict__["past_clocks"]
    assert pickle.loads(pickle.dumps(window)).past_clocks == {}
