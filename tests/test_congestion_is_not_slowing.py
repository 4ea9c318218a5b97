"""A port that waits for credits with no faulty receiver to give the waiting to is held back
by the fabric (congestion): that is no sign the port slows the job, so it does not make the
port a regression's lead (EvidenceBook.back_pressure, JobState._slowing). The waiting still
ranks it, and a receiver that others wait on still shows slowness.

A benign soak (quirky_soak seed 252, job soak-a) named node-0001's port mlx5_0/1, a noisy
port with a trickle of symbol errors all its life, for a job regression: its credit waits
stood 3.98 spreads off its peers during a congestion (1.5 of its score 3.28)."""

from __future__ import annotations

import numpy as np

from reflex_localize.flows.judge.job_evidence import BACK_PRESSURE, EvidenceBook
from reflex_localize.flows.judge.job_step import JobConfig, JobState

SENDER = "node-0001|nic|mlx5_0/1"
RECEIVER = "node-0017|nic|mlx5_0/1"
END_NS = 4500 * 10**9


def _book(receiver_faulty: bool) -> tuple[EvidenceBook, dict[str, float], dict[str, float]]:
    book = EvidenceBook()
    book.amounts = {SENDER: {BACK_PRESSURE: 1.5, "nic_symbol_error_rate": 0.58}}
    if receiver_faulty:
        book.amounts[RECEIVER] = {"nic_symbol_error_rate": 0.8}
    totals = {entity: sum(amounts.values()) for entity, amounts in book.amounts.items()}
    congested: dict[str, float] = {}
    book.back_pressure(totals, END_NS, congested)
    return book, totals, congested


def test_waits_with_no_faulty_receiver_are_congestion() -> None:
    _, totals, congested = _book(receiver_faulty=False)
    assert congested == {SENDER: 1.5}
    assert totals[SENDER] == 1.5 + 0.58  # still ranks it


def test_waits_given_to_a_faulty_receiver_are_its_slowness() -> None:
    _, totals, congested = _book(receiver_faulty=True)
    assert congested == {}
    assert totals[RECEIVER] == 0.8 + 1.5


def test_a_congested_port_is_not_a_regressions_lead() -> None:
    state = JobState("soak-a", JobConfig())
    state.book.since[(SENDER, BACK_PRESSURE)] = END_NS - 30 * 10**9
    state.book.since[(SENDER, "nic_symbol_error_rate")] = END_NS - 2120 * 10**9
    keys = np.array([SENDER], dtype=object)
    state.compound.update(keys, np.array([3.28]))
    state.corrected.update(keys, np.array([1.5]))  # its waits, as _process keeps them
    state.fresh = {SENDER}
    assert state.compound.get(SENDER) >= state.config.min_suspect_score
    assert state._strong_suspect(END_NS) is None
