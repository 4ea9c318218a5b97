"""The whole flow under hostile input: valid telemetry of a job with a launch straggler mixed
with broken lines of every kind (future and past stamps, unit mistakes, duplicates, garbage,
truncation, a contradicting world size). The straggler is still found, and every broken line
is counted under a fixed reason code: none is lost, none crashes the flow."""

from __future__ import annotations

from pathlib import Path

from hook_jobs import HookJob
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reflex_localize.flows.io.sources import LineProtocolSource
from reflex_localize.flows.runner import run_in_process
from reflex_localize.schemas.codec import encode

YEAR_NS = 365 * 86_400 * 10**9


def _restamp(line: str, stamp: int) -> str:
    return f"{line.rsplit(' ', 1)[0]} {stamp}"


def _stamp(line: str) -> int:
    return int(line.rsplit(" ", 1)[1])


# Each breaks one line; the reason code(s) the flow may count it under.
BREAKERS = {
    "future": (lambda line: _restamp(line, _stamp(line) + 30 * YEAR_NS), {"timestamp_in_future"}),
    "seconds": (lambda line: _restamp(line, _stamp(line) // 10**9), {"timestamp_in_seconds"}),
    "millis": (lambda line: _restamp(line, _stamp(line) // 10**6), {"timestamp_in_milliseconds"}),
    "past": (lambda line: _restamp(line, _stamp(line) - 10 * YEAR_NS), {"timestamp_before_stream"}),
    "truncated": (
        lambda line: line[: len(line) // 3],
        {"bad_sections", "bad_key_value", "bad_value", "no_timestamp", "missing_tag", "no_fields"},
    ),
    "garbage": (lambda line: "\x00\x07 ~~ !!", {"bad_sections", "bad_key_value", "empty_line"}),
    "undeclared": (lambda line: "zz" + line, {"undeclared_measurement"}),
}
KINDS = sorted(BREAKERS)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    picks=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(KINDS)), max_size=40),
    duplicates=st.integers(0, 10),
    step_s=st.sampled_from([3.0, 12.0, 30.0]),
)
def test_the_straggler_is_found_and_every_broken_line_counted(
    picks: list[tuple[int, str]], duplicates: int, step_s: float, tmp_path: Path
) -> None:
    job = HookJob(
        nodes=4, ranks_per_node=2, step_s=step_s, steps=max(8, int(240 / step_s)), omit=(),
        compute=lambda rank, step: 0.9 * step_s if rank == 6 else 0.4 * step_s,
    )  # fmt: skip
    lines = sorted((encode(p) for p in job.points()), key=_stamp)
    broken: dict[int, set[str]] = {}
    for where, kind in picks:
        index = 64 + where % (len(lines) - 64)  # the stream's first lines set its clock
        if index in broken:
            continue
        breaker, codes = BREAKERS[kind]
        lines[index] = breaker(lines[index])
        broken[index] = codes
    # A retried write repeats lines next to the originals: each copy follows its line.
    clean = [i for i in range(len(lines) // 2, len(lines)) if i not in broken][:duplicates]
    doubled = [text for i, line in enumerate(lines) for text in [line] * (2 if i in clean else 1)]
    path = tmp_path / f"fuzz-{len(picks)}-{duplicates}.lp"
    path.write_text("\n".join(doubled) + "\n")
    result = run_in_process(LineProtocolSource(path, 1, 10.0))
    stragglers = [e for e in result.events if e.trigger == "straggler"]
    assert stragglers and stragglers[0].top is not None
    assert stragglers[0].top.entity == f"{job.node_of(6)}|gpu|0"
    counted = sum(result.error_counts.values())
    assert counted == len(broken) + len(clean), result.error_counts
    allowed = {code for _, codes in BREAKERS.values() for code in codes} | {"duplicate_point"}
    assert set(result.error_counts) <= allowed, result.error_counts
