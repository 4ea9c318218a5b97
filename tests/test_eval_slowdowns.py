"""`reflex eval` on a job-wide benign slowdown (slow shared storage, a heavier workload): the
first "no hardware fault" of that job answers it, and nothing else there is right."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from reflex_localize.shell import eval_harness
from reflex_localize.shell.eval_harness import Slowdown, job_slowdowns
from reflex_localize.simulator.scenario import BenignEpisode

S = 10**9
NONE = SimpleNamespace(node="", component="none", index="", job="", expect="no_hardware_fault",
                       fault_type="none", fault_class="none", onset_ns=0)  # fmt: skip


def _event(at_s: float, *nodes: str, job: str = "j") -> Any:
    suspects = [SimpleNamespace(node=n, component="gpu", index="1") for n in nodes]
    return SimpleNamespace(time_ns=int(at_s * S), job=job, suspects=suspects, severity="info",
                           trigger="regression")  # fmt: skip


def _score(events: list[Any]) -> eval_harness.ScenarioResult:
    slow = [Slowdown("j", 300 * S, 600 * S)]
    return eval_harness.score_scenario("s", "reflex", [NONE], events, 1.0, slow)


def test_the_first_info_verdict_in_the_slowdown_is_right_and_a_repeat_is_not() -> None:
    result = _score([_event(400), _event(500)])
    assert (result.right_events, result.false_events, result.false_blaming) == (1, 1, 0)
    assert result.benign_only  # its node-hours stay benign ones


def test_an_event_naming_hardware_in_the_slowdown_is_false() -> None:
    result = _score([_event(400, "n1")])
    assert (result.right_events, result.false_events, result.false_blaming) == (0, 1, 1)


def test_an_info_verdict_of_another_job_or_before_the_slowdown_is_false() -> None:
    result = _score([_event(200), _event(400, job="other"), _event(1300)])
    assert (result.right_events, result.false_events) == (0, 3)


def test_without_the_slowdowns_every_event_of_a_benign_run_is_false() -> None:
    result = eval_harness.score_scenario("s", "reflex", [NONE], [_event(400)], 1.0)
    assert (result.right_events, result.false_events) == (0, 1)


def test_only_job_wide_kinds_are_slowdowns() -> None:
    scenario = SimpleNamespace(start_ns=10 * S, benign=[
        BenignEpisode("storage_slow", 100.0, 50.0, job="a"),
        BenignEpisode("workload_heavier", 200.0, 60.0, job="b"),
        BenignEpisode("app_xid", 100.0, node="n1"),
        BenignEpisode("throttles", 100.0, node="n1"),
    ])  # fmt: skip
    assert job_slowdowns(scenario) == [
        Slowdown("a", 110 * S, 160 * S), Slowdown("b", 210 * S, 270 * S)
    ]  # fmt: skip
