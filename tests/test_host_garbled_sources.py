"""One garbled /proc file costs the host collector only that file's fields.

Each test runs the collector twice, as on a node: first over the captured tree
(tests/fixtures/host/proc, the CPU baseline), then over a copy of the tree captured one second
later with one file garbled. The expected values are those of tests/golden/host.lp.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reflex_localize.collectors.agent import Agent
from reflex_localize.collectors.base import FixedClock
from reflex_localize.collectors.host import HostCollector
from reflex_localize.schemas.codec import Point

FIXTURES = Path(__file__).parent / "fixtures"
BASELINE = FIXTURES / "host" / "proc"
LATER = FIXTURES / "host-1s-later" / "proc"
T0 = 1_700_000_000_000_000_000
# The second run's host fields, by the file they come from (tests/golden/host.lp, line 3).
HOST_FIELDS: dict[str, dict[str, float | int]] = {
    "stat": {
        "cpu_busy_ratio": 0.9953703703703703,
        "cpu_iowait_ratio": 0.0,
        "cpu_steal_ratio": 0.000925925925925926,
    },
    "meminfo": {"memory_total_bytes": 25276510208, "memory_available_bytes": 24511729664},
    "loadavg": {"load1": 3.8, "load5": 2.39, "load15": 1.06, "procs_running": 5},
    "pressure/cpu": {"psi_cpu_some_avg10_ratio": 0.5939},
    "pressure/memory": {"psi_memory_some_avg10_ratio": 0.0, "psi_memory_full_avg10_ratio": 0.0},
    "pressure/io": {"psi_io_some_avg10_ratio": 0.0, "psi_io_full_avg10_ratio": 0.0},
}
DISKS = {"vda": {"read_bytes": 1189151744, "written_bytes": 4121526272, "io_time_seconds": 7.444}}
SOURCES = [*HOST_FIELDS, "diskstats"]
VDA = " 254       0 vda "
# (file, garbled content, what the reason must say after "<path>: ")
GARBLED = [
    ("stat", "cpu  58544 0 6380 abc 365 0 123 109 0 0", "could not parse 'cpu  58544 0 6380 abc"),
    ("stat", "garbage", "no 'cpu ' line"),
    ("meminfo", "MemTotal: abc kB\nMemAvailable: 1 kB", "could not parse 'MemTotal: abc kB'"),
    ("meminfo", "MemTotal:", "could not parse 'MemTotal:'"),
    ("meminfo", "garbage", "no MemTotal or MemAvailable line"),
    ("meminfo", "MemTotal: 99999999999999999999 kB", "memory_total_bytes=102399999999999"),
    ("loadavg", "garbage", "could not parse 'garbage'"),
    ("loadavg", "nan 2.39 1.06 5/99 13542", "load1=nan is not finite"),
    ("pressure/cpu", "some avg10=xyz avg60=0.00 avg300=0.00 total=0", "could not parse 'some"),
    ("pressure/memory", "garbage", "no 'some avg10=' value"),
    ("pressure/io", "some avg10=inf avg60=0 total=0", "psi_io_some_avg10_ratio=inf is not"),
    ("diskstats", VDA + "31629 5676", f"could not parse '{VDA.strip()} 31629 5676'"),
    ("diskstats", VDA + "1 2 x 4 5 6 7 8 9 10 11 12 13 14", "could not parse '254"),
]


@pytest.fixture
def later(tmp_path: Path) -> Path:
    """A writable copy of the tree captured one second after the baseline."""
    shutil.copytree(LATER, tmp_path / "proc")
    return tmp_path / "proc"


def second_run(collector: HostCollector, proc: Path) -> list[Point]:
    collector.proc_root = BASELINE
    list(collector.collect(T0))
    collector.proc_root = proc
    return list(collector.collect(T0 + 10**9))


def fields_by_source(points: list[Point]) -> tuple[dict[str, object], dict[str, object]]:
    """The host fields and the disks of one run."""
    host = next((p.fields for p in points if p.measurement == "host"), {})
    disks = {p.tags["device"]: dict(p.fields) for p in points if p.measurement == "host_disk"}
    return dict(host), dict(disks)


def assert_only_missing(points: list[Point], garbled: str) -> None:
    """Every source but ``garbled`` gave its fixture values; ``garbled`` gave nothing."""
    host, disks = fields_by_source(points)
    expected = {k: v for name, f in HOST_FIELDS.items() if name != garbled for k, v in f.items()}
    assert host == expected
    assert disks == ({} if garbled == "diskstats" else DISKS)


@pytest.mark.parametrize(("name", "content", "reason"), GARBLED)
def test_one_garbled_file_costs_only_its_fields(
    later: Path, name: str, content: str, reason: str
) -> None:
    (later / name).write_text(content + "\n")
    collector = HostCollector("c1", "n1")
    assert_only_missing(second_run(collector, later), name)
    assert collector.parse_errors == {name: 1}
    assert collector.last_parse_errors[name].startswith(f"{later / name}: {reason}")


def test_reason_names_the_file_and_quotes_the_line(later: Path) -> None:
    (later / "loadavg").write_text("garbage\n")
    collector = HostCollector("c1", "n1")
    second_run(collector, later)
    assert collector.last_parse_errors == {"loadavg": f"{later}/loadavg: could not parse 'garbage'"}


def test_a_long_garbled_line_is_cut_in_the_reason(later: Path) -> None:
    (later / "loadavg").write_text("x" * 10_000)
    collector = HostCollector("c1", "n1")
    second_run(collector, later)
    assert len(collector.last_parse_errors["loadavg"]) < len(str(later)) + 120


def test_a_file_that_stays_garbled_warns_ten_times_then_every_thousandth(
    later: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (later / "loadavg").write_text("garbage\n")
    collector = HostCollector("c1", "n1", proc_root=later)
    caplog.set_level(logging.WARNING, logger="reflex_localize.collectors.host")
    for run in range(2000):
        assert "load1" not in fields_by_source(list(collector.collect(T0 + run)))[0]
    assert collector.parse_errors == {"loadavg": 2000}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 12
    assert all("loadavg: could not parse 'garbage'" in message for message in warnings)
    assert warnings[-1].endswith("(2000 so far)")


def test_absent_pressure_files_are_not_errors(later: Path) -> None:
    shutil.rmtree(later / "pressure")  # kernel before 4.20, or booted without psi=1
    collector = HostCollector("c1", "n1")
    host, disks = fields_by_source(second_run(collector, later))
    assert not any(key.startswith("psi_") for key in host) and disks == DISKS
    assert collector.parse_errors == {}


def test_a_file_read_well_again_gives_its_fields_again(later: Path) -> None:
    (later / "meminfo").write_text("garbage\n")
    collector = HostCollector("c1", "n1")
    second_run(collector, later)
    shutil.copy(LATER / "meminfo", later / "meminfo")
    host, _ = fields_by_source(list(collector.collect(T0 + 2 * 10**9)))
    assert {key: host.get(key) for key in HOST_FIELDS["meminfo"]} == HOST_FIELDS["meminfo"]
    assert collector.parse_errors == {"meminfo": 1}, "the count is since start, not per run"


def test_every_source_garbled_is_a_failed_run(later: Path) -> None:
    for name in SOURCES:
        (later / name).write_text("garbage\n")
    collector = HostCollector("c1", "n1", proc_root=later)
    agent = Agent([collector], lambda _: None, cluster="c1", node="n1", clock=FixedClock(T0))
    (self_metric,) = agent.run_once()
    assert self_metric.fields["success"] is False and agent.states[0].failures == 1
    assert collector.parse_errors == dict.fromkeys(SOURCES, 1)
    with pytest.raises(ValueError, match="every readable host source is garbled"):
        list(collector.collect(T0))


def test_agent_counts_a_run_with_one_garbled_file_as_a_success(later: Path) -> None:
    (later / "loadavg").write_text("garbage\n")
    collector = HostCollector("c1", "n1", proc_root=BASELINE)
    clock = FixedClock(T0)
    agent = Agent([collector], lambda _: None, cluster="c1", node="n1", clock=clock)
    agent.run_once()
    collector.proc_root = later
    clock.advance(1.0)
    points = agent.run_once()
    state = agent.states[0]
    assert state.failures == 0 and state.rejected == 0
    assert points[-1].fields["success"] is True and points[-1].fields["points"] == 2
    assert points[-1].fields["errors"] == 1  # the garbled read shows in InfluxDB
    assert_only_missing(points[:-1], "loadavg")


@pytest.fixture(scope="module")
def shared_later(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tree for every hypothesis example (each restores the file it garbles)."""
    root = tmp_path_factory.mktemp("garbled") / "proc"
    shutil.copytree(LATER, root)
    return root


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    name=st.sampled_from(SOURCES),
    noise=st.binary(max_size=200),
    position=st.integers(min_value=0, max_value=2000),
    splice=st.booleans(),
)
def test_random_bytes_in_one_file_never_cost_the_others(
    shared_later: Path, name: str, noise: bytes, position: int, splice: bool
) -> None:
    """Random bytes, alone or spliced into the real file, in one source file at a time."""
    original = (LATER / name).read_bytes()
    at = position % (len(original) + 1)
    garbled = original[:at] + noise + original[at:] if splice else noise
    (shared_later / name).write_bytes(garbled)
    try:
        collector = HostCollector("c1", "n1")
        points = second_run(collector, shared_later)  # must not raise
    finally:
        (shared_later / name).write_bytes(original)
    host, disks = fields_by_source(points)
    for source, fields in HOST_FIELDS.items():
        if source != name:
            assert {key: host.get(key) for key in fields} == fields
    if name != "diskstats":
        assert disks == DISKS
    assert set(collector.parse_errors) <= {name}
    if collector.parse_errors:
        assert collector.last_parse_errors[name].startswith(f"{shared_later / name}: ")
        assert_only_missing(points, name)
