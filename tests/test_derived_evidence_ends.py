"""Evidence the book derives (back-pressure moved to the port it waits on, a record from
earlier jobs, the impact model's prediction) stops holding when it stops, as a signal's does.

Its start time is what the persistence rule reads (JobState._held): a NIC port that a peer
waited on once, hours before, counted as held at a benign soak's later regression and was
named for it."""

from __future__ import annotations

from reflex_localize.flows.judge.job_evidence import BACK_PRESSURE, EvidenceBook

SENDER = "node-0001|nic|mlx5_5/1"
RECEIVER = "node-0017|nic|mlx5_5/1"
WINDOW_NS = 10 * 10**9


def _pressed(book: EvidenceBook, end_ns: int, waiting: bool) -> dict[str, float]:
    book.amounts = {RECEIVER: {"nic_symbol_error_rate": 0.8}}
    if waiting:
        book.amounts[SENDER] = {BACK_PRESSURE: 1.5}
    totals = {entity: sum(amounts.values()) for entity, amounts in book.amounts.items()}
    book.back_pressure(totals, end_ns)
    return totals


def test_back_pressure_holds_while_it_lasts_and_ends_with_it() -> None:
    book = EvidenceBook()
    totals = _pressed(book, WINDOW_NS, waiting=True)
    assert totals[RECEIVER] == 0.8 + 1.5 and totals[SENDER] == 0.0
    _pressed(book, 2 * WINDOW_NS, waiting=True)
    assert book.since[(RECEIVER, "back_pressure")] == WINDOW_NS  # held since the first
    _pressed(book, 3 * WINDOW_NS, waiting=False)
    assert (RECEIVER, "back_pressure") not in book.since
    _pressed(book, 4 * WINDOW_NS, waiting=True)
    assert book.since[(RECEIVER, "back_pressure")] == 4 * WINDOW_NS  # a new episode


def test_a_record_holds_only_while_the_part_shows_fresh_evidence() -> None:
    book = EvidenceBook()
    records = {RECEIVER: (3.0, "xid 79")}
    book.history({RECEIVER: 1.0}, records, WINDOW_NS)
    assert (RECEIVER, "record") in book.since
    book.history({}, records, 2 * WINDOW_NS)
    assert (RECEIVER, "record") not in book.since
