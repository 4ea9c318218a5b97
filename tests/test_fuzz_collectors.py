"""Fuzzing the /proc, /sys and kmsg parsers of the node agent with mutated real files.

Contract checked on 10,000+ inputs per parser family:
- the pure /proc parsers return a value or raise ``ValueError`` (the collector's documented
  signal for "this file is garbage"), nothing else;
- through the agent, a collector run over a corrupted fixture tree never raises: each run is a
  success whose points all pass the schema, or a failure counted in ``CollectorState.failures``
  and the ``reflex_collector`` self-metric (success=false), and each bad point is counted in
  ``CollectorState.rejected``;
- kmsg records are parsed or skipped; events that break the schema are counted, not written.
"""

from __future__ import annotations

import logging
import random
import shutil
from pathlib import Path

import pytest
from fuzz_support import FUZZ, SEEDS, Tally, fuzz_input
from hypothesis import given

from reflex_localize.collectors.agent import Agent
from reflex_localize.collectors.base import Collector, FixedClock
from reflex_localize.collectors.host import (
    HostCollector,
    parse_diskstats,
    parse_loadavg,
    parse_meminfo,
    parse_pressure,
    parse_stat,
)
from reflex_localize.collectors.kmsg import KmsgCollector, classify, parse_record
from reflex_localize.collectors.nic import NicCollector, parse_enum, parse_rate
from reflex_localize.schemas.codec import Point, validate

FIXTURES = Path(__file__).parent / "fixtures"
HOST_FILES = ["stat", "meminfo", "loadavg", "diskstats", "pressure/cpu", "pressure/io"]
HOST_SEEDS = {name: (FIXTURES / "host" / "proc" / name).read_text() for name in HOST_FILES}
PARSERS = {
    "stat": parse_stat,
    "meminfo": parse_meminfo,
    "loadavg": parse_loadavg,
    "diskstats": parse_diskstats,
    "pressure/cpu": parse_pressure,
    "pressure/io": parse_pressure,
}
NIC_FILES = sorted(
    p.relative_to(FIXTURES / "nic") for p in (FIXTURES / "nic" / "sys").rglob("*") if p.is_file()
)
KMSG_SEEDS = [
    line
    for name in ("kmsg.txt", "dmesg.txt")
    for line in (FIXTURES / "kmsg" / name).read_text().splitlines()
]
COLLECTOR_RUNS = 2_000  # whole collector runs over a corrupted tree: file I/O each time
_NAMES = ("proc parsers", "host collector", "nic parsers", "nic collector", "kmsg")
_tallies = {name: Tally(name) for name in (*_NAMES, "kmsg collector")}


def _agent(collector: Collector) -> Agent:
    return Agent([collector], lambda _: None, cluster="c1", node="n1", clock=FixedClock(10**18))


def _count_run(tally: Tally, agent: Agent) -> None:
    """Runs the agent once; every outcome must be a valid success or a counted failure."""
    state = agent.states[0]
    failures, rejected = state.failures, state.rejected
    garbled = dict(getattr(state.collector, "parse_errors", {}))
    points = agent.run_once()  # must not raise, whatever the files hold
    for point in points:
        validate(point)
    self_metric = points[-1]
    assert self_metric.measurement == "reflex_collector"
    if state.failures > failures:
        assert self_metric.fields["success"] is False
        tally.reject("collector run failed (counted in failures, success=false)")
    else:
        assert self_metric.fields["success"] is True
        tally.accepted += 1
    if state.rejected > rejected:
        tally.reject("point broke the schema (counted in rejected)")
    for source, count in getattr(state.collector, "parse_errors", {}).items():
        if count > garbled.get(source, 0):
            tally.reject(f"{source} garbled: its fields skipped, counted in errors")


@FUZZ
@given(SEEDS)
def test_proc_parsers_raise_only_value_error(seed: int) -> None:
    rng = random.Random(seed)
    name = rng.choice(HOST_FILES)
    text = fuzz_input(rng, [HOST_SEEDS[name]])
    tally = _tallies["proc parsers"]
    tally.inputs += 1
    try:
        PARSERS[name](text)
    except ValueError as error:
        tally.reject(f"{name}: {type(error).__name__}")
        return
    tally.accepted += 1


@pytest.fixture(scope="module")
def proc_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("proc") / "proc"
    shutil.copytree(FIXTURES / "host" / "proc", root)
    return root


@pytest.fixture(scope="module")
def sys_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("nic")
    shutil.copytree(FIXTURES / "nic" / "sys", root / "sys")
    return root


def test_host_collector_survives_corrupt_files(
    proc_tree: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Runs of the host collector, each over one freshly corrupted /proc file (the pure
    parsers above take the 10,000; this checks the collector and the agent around them)."""
    caplog.set_level(
        logging.CRITICAL, logger="reflex_localize.collectors.agent"
    )  # 1000s of tracebacks
    collector = HostCollector("c1", "n1", proc_root=proc_tree)
    agent = _agent(collector)
    rng = random.Random(19)
    tally = _tallies["host collector"]
    for _ in range(COLLECTOR_RUNS):
        name = rng.choice(HOST_FILES)
        path = proc_tree / name
        path.write_bytes(_corrupt_bytes(rng, HOST_SEEDS[name]))
        tally.inputs += 1
        _count_run(tally, agent)
        path.write_text(HOST_SEEDS[name])
    tally.check(COLLECTOR_RUNS)


@FUZZ
@given(SEEDS)
def test_nic_parsers_return_value_or_none(seed: int) -> None:
    rng = random.Random(seed)
    tally = _tallies["nic parsers"]
    tally.inputs += 1
    state = parse_enum(fuzz_input(rng, ["4: ACTIVE", "5: LinkUp", "1: DOWN"]))
    rate = parse_rate(fuzz_input(rng, ["200 Gb/sec (4X HDR)", "100 Gb/sec (2X HDR)"]))
    assert state is None or (isinstance(state, int) and state >= 0)
    assert rate is None or isinstance(rate, float)
    if state is None or rate is None:
        tally.reject("state or rate unreadable: field left absent (None)")
    else:
        tally.accepted += 1


def test_nic_collector_survives_corrupt_files(
    sys_tree: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Runs of the NIC collector, each over one freshly corrupted sysfs attribute."""
    caplog.set_level(logging.CRITICAL, logger="reflex_localize.collectors.agent")
    collector = NicCollector("c1", "n1", sys_root=sys_tree / "sys")
    agent = _agent(collector)
    rng = random.Random(23)
    tally = _tallies["nic collector"]
    for _ in range(COLLECTOR_RUNS):
        relative = rng.choice(NIC_FILES)
        original = (FIXTURES / "nic" / relative).read_bytes()
        path = sys_tree / relative
        path.write_bytes(_corrupt_bytes(rng, original.decode(errors="replace")))
        tally.inputs += 1
        _count_run(tally, agent)
        path.write_bytes(original)
    tally.check(COLLECTOR_RUNS)


@FUZZ
@given(SEEDS)
def test_kmsg_parse_and_classify(seed: int) -> None:
    rng = random.Random(seed)
    text = fuzz_input(rng, KMSG_SEEDS)
    tally = _tallies["kmsg"]
    tally.inputs += 1
    record = parse_record(text)
    if record is None:
        tally.reject("continuation or empty line")
        return
    assert "\n" not in record.message
    event = classify(record.message)
    if event is None:
        tally.reject("no event in the message")
        return
    assert event.code is None or event.code >= 0
    tally.accepted += 1


def test_kmsg_collector_counts_bad_events(tmp_path: Path) -> None:
    """10,000 mutated kmsg records through the collector and the agent's schema check."""
    rng = random.Random(29)
    log = tmp_path / "kmsg.txt"
    log.write_text("")
    collector = KmsgCollector("c1", "n1", path=log, proc_root=FIXTURES / "kmsg" / "proc")
    agent = _agent(collector)
    tally = _tallies["kmsg collector"]
    with log.open("a", encoding="utf-8", errors="surrogatepass") as handle:
        for _ in range(100):
            records = [fuzz_input(rng, KMSG_SEEDS).replace("\n", " ") for _ in range(100)]
            handle.write("".join(record + "\n" for record in records))
            handle.flush()
            tally.inputs += len(records)
            state = agent.states[0]
            before = state.rejected
            points = agent.run_once()
            assert state.failures == 0
            events = [p for p in points if p.measurement == "event"]
            tally.accepted += len(events)
            for _ in range(state.rejected - before):
                tally.reject("event broke the schema (counted in rejected)")
            _check_events(events)
    tally.check()


def _check_events(events: list[Point]) -> None:
    for event in events:
        assert event.tags["source"] == "kernel"
        assert event.tags["kind"] in ("xid", "mce", "oom_kill", "link_up", "link_down")


def _corrupt_bytes(rng: random.Random, seed_text: str) -> bytes:
    """A mutated file, sometimes with bytes that are not UTF-8 at all."""
    data = fuzz_input(rng, [seed_text]).encode("utf-8", "replace")
    if rng.random() < 0.1:
        cut = rng.randint(0, len(data))
        data = data[:cut] + bytes(rng.randint(0x80, 0xFF) for _ in range(3)) + data[cut:]
    return data


@pytest.mark.parametrize("name", ["proc parsers", "nic parsers", "kmsg"])
def test_fuzz_tallies(name: str) -> None:
    """Runs after the hypothesis tests above (pytest keeps file order): 10,000 inputs each."""
    _tallies[name].check()
