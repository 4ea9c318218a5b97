"""Missing nodes: flows/judge/liveness.py turns a silent job member into one ``node_missing`` event.

(Wiring it into flows/judge/job_step.py is the lead's: see the module docstring of
flows/judge/liveness.py.)
"""

from __future__ import annotations

import pickle

import numpy as np

from reflex_localize.flows.judge.liveness import LivenessTracker
from reflex_localize.flows.messages import JobWindow, RankInfo, StepRows

END = 1_767_225_600_000_000_000
WINDOW_NS = 10 * 10**9
MEMBERS = {f"n{i}" for i in range(8)}


def _run(tracker: LivenessTracker, alive_by_window: list[set[str]], members: set[str] = MEMBERS):
    return [
        tracker.observe("job-a", w, END + w * WINDOW_NS, members, alive)
        for w, alive in enumerate(alive_by_window)
    ]


def test_silent_member_is_one_critical_event_after_threshold() -> None:
    alive = [MEMBERS] * 3 + [MEMBERS - {"n5"}] * 10
    events = _run(LivenessTracker(missing_after_windows=3), alive)
    flat = [e for window in events for e in window]
    assert len(flat) == 1
    event = flat[0]
    assert (event.node, event.kind, event.severity, event.component, event.job) == (
        "n5", "node_missing", "critical", "node", "job-a",
    )  # fmt: skip
    assert events.index([event]) == 5  # silent in windows 3, 4, 5: the third silent window
    assert event.time_ns == END + 5 * WINDOW_NS


def test_node_that_comes_back_is_rearmed() -> None:
    gone = MEMBERS - {"n2"}
    alive = [MEMBERS, gone, gone, gone, MEMBERS, MEMBERS, gone, gone, gone, gone]
    events = [e for w in _run(LivenessTracker(missing_after_windows=3), alive) for e in w]
    assert [e.time_ns for e in events] == [END + 3 * WINDOW_NS, END + 8 * WINDOW_NS]


def test_short_gaps_and_departed_nodes_are_not_missing() -> None:
    flicker = [MEMBERS, MEMBERS - {"n1"}, MEMBERS - {"n1"}, MEMBERS] * 5  # 2-window gaps
    assert not any(_run(LivenessTracker(missing_after_windows=3), flicker))
    tracker = LivenessTracker(missing_after_windows=2)
    _run(tracker, [MEMBERS])
    smaller = MEMBERS - {"n7"}  # n7 left the job (rescheduled): not missing
    assert not any(_run(tracker, [smaller] * 5, members=smaller))
    assert "n7" not in tracker._jobs["job-a"]


def test_whole_job_silent_is_one_event_not_a_storm() -> None:
    events = [e for w in _run(LivenessTracker(), [MEMBERS] + [set()] * 6) for e in w]
    assert len(events) == 1
    assert f"{len(MEMBERS)} of {len(MEMBERS)} nodes" in events[0].meaning


def test_state_pickles_and_stays_bounded() -> None:
    tracker = LivenessTracker()
    for job in range(100):
        tracker.observe(f"job-{job}", 0, END, MEMBERS, MEMBERS)
        tracker.forget_job(f"job-{job}")
    assert not tracker._jobs
    _run(tracker, [MEMBERS - {"n3"}] * 2)
    copy = pickle.loads(pickle.dumps(tracker))
    assert copy.observe("job-a", 2, END, MEMBERS, MEMBERS - {"n3"})[0].node == "n3"


def test_shard_windows_are_merged() -> None:
    def part(shard: str, nodes: list[str], alive: list[str], window: int) -> JobWindow:
        members = [
            RankInfo(i, node, 0, i, 0, 0, 1, "h100-sxm5-80gb") for i, node in enumerate(nodes)
        ]
        empty = np.zeros((0, 1))
        return JobWindow("job-a", shard, window, END + window * WINDOW_NS, np.zeros(0, object),
                         empty, empty, empty, np.zeros(0, object), members, [], StepRows(),
                         alive, len(nodes))  # fmt: skip

    tracker = LivenessTracker(missing_after_windows=2)
    events = []
    for window in range(3):
        events += tracker.observe_windows(
            [part("0", ["n0", "n1"], ["n0", "n1"], window), part("1", ["n2", "n3"], ["n2"], window)]
        )
    assert [(e.node, e.time_ns) for e in events] == [("n3", END + WINDOW_NS)]
