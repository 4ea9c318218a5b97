"""An event lists a part's evidence that holds now, or that ended (an error: arrived) within
the last five minutes; what ended before is the part's past (EvidenceBook.notes).

A benign soak's regression headlined a GPU's corrected-ECC rate (quirky_soak seed 229,
node-0017 GPU 3): the note was from a burst long over, its episode "held" 11,130 s, while what
made the GPU a suspect was a 40 s thermal throttle. A stale note of a communication fault would
also count as held for a comm straggler, and one from its own history would let a late suspect
through as if it had left its history now."""

from __future__ import annotations

from reflex_localize.flows.incidents.events import Evidence
from reflex_localize.flows.judge.job_evidence import NOTE_KEEP_NS, EvidenceBook

S = 10**9
GPU = "node-0017|gpu|3"
NOW = 11_770 * S


def _book() -> EvidenceBook:
    book = EvidenceBook()
    book.now_ns = NOW
    book.evidence[GPU] = [
        Evidence("ecc_corrected_rate", 9.0, 9.0, 1.2, 640 * S),
        Evidence("throttle_thermal", 5.97, 6.0, 0.79, 11_730 * S),
        Evidence("xid:13", None, None, 2.0, 900 * S),
    ]
    book.since[(GPU, "throttle_thermal")] = 11_730 * S
    return book


def test_a_burst_long_over_is_not_listed() -> None:
    book = _book()
    book.ended[(GPU, "ecc_corrected_rate")] = (640 * S, 700 * S)
    assert [e.signal for e in book.notes(GPU)] == ["throttle_thermal"]


def test_a_burst_that_ended_minutes_ago_still_is() -> None:
    book = _book()
    book.ended[(GPU, "ecc_corrected_rate")] = (11_500 * S, NOW - NOTE_KEEP_NS + 10 * S)
    assert [e.signal for e in book.notes(GPU)] == ["ecc_corrected_rate", "throttle_thermal"]


def test_evidence_that_still_holds_is_listed_however_old() -> None:
    book = _book()
    book.since[(GPU, "ecc_corrected_rate")] = 640 * S
    assert [e.signal for e in book.notes(GPU)] == ["ecc_corrected_rate", "throttle_thermal"]


def test_an_error_ages_from_its_arrival() -> None:
    book = _book()
    book.evidence[GPU].append(Evidence("xid:79", None, None, 6.0, NOW - 20 * S))
    assert [e.signal for e in book.notes(GPU)] == ["xid:79", "throttle_thermal"]
