"""The schema check catches undeclared names, and everything shipped passes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_localize.dashboards.schema_check import (
    check_queries,
    check_query,
    flux_files,
    names_used,
)

DASHBOARDS = Path(__file__).resolve().parents[1] / "dashboards"


def test_it_reads_comparisons_contains_and_tag_arguments() -> None:
    used = names_used(
        'from(bucket: "t") |> filter(fn: (r) => r["_measurement"] == "gpu")\n'
        '  |> filter(fn: (r) => contains(value: r._field, set: ["power_watts", "sm_clock_mhz"]))\n'
        '  |> filter(fn: (r) => r._field != "temperature_celsius")\n'
        'schema.tagValues(bucket: "t", tag: "node")'
    )
    assert used.measurements == {"gpu"}
    assert used.fields == {"power_watts", "sm_clock_mhz", "temperature_celsius"}
    assert used.tags == {"node"}


@pytest.mark.parametrize(
    ("flux", "problem"),
    [
        ('filter(fn: (r) => r._measurement == "gpus")', "measurement 'gpus' is not declared"),
        (
            'filter(fn: (r) => r._measurement == "gpu" and r._field == "power_mw")',
            "field 'power_mw' is not declared for measurement(s) gpu",
        ),
        (
            # declared, but for another measurement
            'filter(fn: (r) => r._measurement == "host" and r._field == "power_watts")',
            "field 'power_watts' is not declared for measurement(s) host",
        ),
        (
            'filter(fn: (r) => contains(value: r._field, set: ["symbol_error", "symbol_errors"]))',
            "field 'symbol_errors' is not declared for measurement(s) any",
        ),
        ('schema.tagValues(bucket: "t", tag: "hostname")', "tag 'hostname' is not declared"),
    ],
)
def test_a_query_naming_undeclared_names_fails(flux: str, problem: str) -> None:
    assert check_query(flux) == [problem]


def test_commented_out_names_are_ignored() -> None:
    assert check_query('// r._measurement == "nope"\nfrom(bucket: "t")') == []


def test_a_bad_cookbook_file_is_reported_with_its_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.flux"
    bad.write_text('from(bucket: "t") |> filter(fn: (r) => r._measurement == "gpu_temps")')
    assert check_queries(flux_files(tmp_path)) == [
        f"{bad}: measurement 'gpu_temps' is not declared"
    ]


def test_alert_tasks_and_cookbook_queries_name_only_declared_names() -> None:
    files = flux_files(DASHBOARDS / "alerts", DASHBOARDS / "queries")
    assert len(files) >= 10
    assert check_queries(files) == []
